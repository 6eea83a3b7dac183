import "fake-indexeddb/auto";
import { createStore } from "idb-keyval";
import { beforeAll, describe, expect, it } from "vitest";
import type { SessionRow } from "../../protocol/index.js";
import type { SessionmuxClient } from "../../src/client/node.js";
import { ConsoleLink } from "../../web/src/console-link.js";
import { SessionCache } from "../../web/src/session-cache.js";
import { SessionListModel } from "../../web/src/session-list-model.js";
import { MAX_PINNED, orderSessions } from "../../web/src/session-list-order.js";
import { ADMIN_TOKEN } from "../support/host.js";
import { until } from "../support/until.js";
import { useTestHost } from "../support/use-test-host.js";
import { hostOrder } from "./session-list-reads.js";

/** Plain sessions created after the parked ones: more than a page, so the parked ones stand past it. */
const NEWER = 60;

const parkedOrder = async (client: SessionmuxClient) =>
  (await client.call("session.list", { limit: 200, parked: true })).sessions.map((row) => row.sessionId);

/** Prompts a session so that its (demo) agent asks for an approval, and waits until it waits on its owner. */
async function park(client: SessionmuxClient, sessionId: string): Promise<void> {
  await client.prompt({ sessionId, text: "/approve deploy" });
  await until(
    async () => (await parkedOrder(client)).includes(sessionId),
    10_000,
    "the session waits on its owner",
  );
}

let cacheCount = 0;
function newModel(client: SessionmuxClient): SessionListModel {
  const link = new ConsoleLink(() => client, ADMIN_TOKEN);
  cacheCount += 1;
  const cache = new SessionCache("p", {
    data: createStore(`pinned-overflow-${cacheCount}`, "entries"),
    usage: createStore(`pinned-overflow-usage-${cacheCount}`, "usage"),
  });
  const model = new SessionListModel(link, cache, () => {});
  link.onListChange((change) => model.apply(change));
  return model;
}

/** What the list shows, as `renderSessionList` draws it: the pins, then the rows within the pages loaded. */
function shown(model: SessionListModel): { pinned: string[]; recent: string[] } {
  const { pinned, recent } = orderSessions(model.rows.values(), model.end, model.pinnedLimit);
  const ids = (rows: SessionRow[]) => rows.map((row) => row.sessionId);
  return { pinned: ids(pinned), recent: ids(recent) };
}

describe("console session list: more sessions waiting on you than are pinned", () => {
  const testHost = useTestHost();

  beforeAll(async () => {
    const { client } = testHost;
    for (let i = 1; i <= MAX_PINNED; i++) {
      const { sessionId } = (await client.call("session.create", { title: `Waiting ${i}` })).header;
      await park(client, sessionId);
    }
    for (let i = 1; i <= NEWER; i++) await client.call("session.create", { title: `Session ${i}` });
  }, 120_000);

  it("offers the ones past the pins, whether the host's read or a live change showed them, and pins them on request", async () => {
    const { client } = testHost;
    const model = newModel(client);
    await model.refresh();
    const parked = await parkedOrder(client);
    expect(parked).toHaveLength(MAX_PINNED);
    expect(shown(model).pinned).toEqual(parked);
    expect(model.morePinned).toBe(false);

    // a newer session comes to wait on you: the oldest waiting one leaves the pins, and stands past
    // the page loaded, so the list offers it
    const order = await hostOrder(client);
    const newest = order[0]!;
    await park(client, newest);
    const oldestParked = parked[parked.length - 1]!;
    // the control stream's projection says it waits (notifications carry only what moves the order)
    const row = (await client.call("session.list", { limit: 1, parked: true })).sessions[0]!;
    expect(row.sessionId).toBe(newest);
    model.project(row);
    expect(shown(model).pinned).toEqual([newest, ...parked.slice(0, -1)]);
    expect(shown(model).recent).not.toContain(oldestParked);
    expect(model.morePinned).toBe(true);

    await model.loadMorePinned();
    expect(shown(model).pinned).toEqual([newest, ...parked]);
    expect(model.pinnedLimit).toBe(2 * MAX_PINNED);
    expect(model.morePinned).toBe(false);

    // a fresh tab reads the host's first page of them, learns of another, and reads it on request
    const tab = newModel(client);
    await tab.refresh();
    const allParked = await parkedOrder(client);
    expect(allParked).toHaveLength(MAX_PINNED + 1);
    expect(shown(tab).pinned).toEqual(allParked.slice(0, MAX_PINNED));
    expect([...shown(tab).pinned, ...shown(tab).recent]).not.toContain(oldestParked);
    expect(tab.morePinned).toBe(true);
    await tab.loadMorePinned();
    expect(shown(tab).pinned).toEqual(allParked);
    expect(tab.morePinned).toBe(false);
  }, 60_000);
});
