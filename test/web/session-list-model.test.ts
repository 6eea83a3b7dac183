import "fake-indexeddb/auto";
import { createStore } from "idb-keyval";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ResultOf } from "../../protocol/index.js";
import { createNodeClient, type SessionmuxClient } from "../../src/client/node.js";
import { ConsoleLink } from "../../web/src/console-link.js";
import { SessionCache } from "../../web/src/session-cache.js";
import { SessionListModel } from "../../web/src/session-list-model.js";
import { orderSessions } from "../../web/src/session-list-order.js";
import { gate } from "../support/gate.js";
import { ADMIN_TOKEN, ALICE_TOKEN, startTestHost, type TestHost } from "../support/host.js";

/** A link whose reads of older list pages are answered by the host at once but handed on only when the test opens `held`. */
class HeldLink extends ConsoleLink {
  held = gate();
  /** Older pages the host has answered, held or not. */
  olderAnswered = 0;

  override async list(
    limit: number,
    filter: { parked?: true; dismissed?: true; before?: string } = {},
  ): Promise<ResultOf<"session.list">> {
    const answer = await super.list(limit, filter);
    if (filter.before !== undefined) {
      this.olderAnswered += 1;
      await this.held.promise;
    }
    return answer;
  }
}

describe("console session list over pages", () => {
  let host: TestHost;
  let client: SessionmuxClient;

  beforeAll(async () => {
    host = await startTestHost();
    client = createNodeClient({ url: host.wsUrl, token: ADMIN_TOKEN });
    for (let i = 1; i <= 60; i++) await client.create({ title: `Session ${i}` });
  });

  afterAll(async () => {
    await client?.close();
    await host?.dispose();
  });

  it("shows one page's worth of the rows the live state describes until the host's first snapshot, then the snapshot's", async () => {
    const link = new HeldLink(() => client, ADMIN_TOKEN);
    const cache = new SessionCache("p", {
      data: createStore("list-model-early", "entries"),
      usage: createStore("list-model-early-usage", "usage"),
    });
    const model = new SessionListModel(link, cache, () => {});
    // the control stream's projections describe every session, and may come before the snapshot
    const { sessions: all } = await client.call("session.list", { limit: 200 });
    for (const row of all) model.project(row);
    const shown = () => orderSessions(model.rows.values(), model.end).recent.map((row) => row.sessionId);
    expect(shown()).toEqual(all.slice(0, 50).map((row) => row.sessionId));
    await model.refresh();
    expect(shown()).toEqual(all.slice(0, 50).map((row) => row.sessionId));
    expect(model.older).toBe(true);
  });

  it("keeps a row that moved or went while an older page was read as the host has it now, once", async () => {
    const link = new HeldLink(() => client, ADMIN_TOKEN);
    const cache = new SessionCache("p", {
      data: createStore("list-model-test", "entries"),
      usage: createStore("list-model-test-usage", "usage"),
    });
    const model = new SessionListModel(link, cache, () => {});
    link.onListChange((change) => model.apply(change));
    await model.refresh();
    expect(model.rows.size).toBe(50);
    expect(model.older).toBe(true);

    // the second page is read now, and handed on only after two of its rows changed
    const loading = model.loadOlder();
    const { sessions: secondPage } = await client.call("session.list", {
      limit: 50,
      before: (await client.call("session.list", { limit: 50 })).next!,
    });
    const [moved, deleted] = [secondPage[2]!.sessionId, secondPage[5]!.sessionId];
    const { seq } = await client.call("session.rename", { sessionId: moved, title: "Renamed while paging" });
    await client.prompt({ sessionId: moved, text: "moves it to the top" });
    await client.call("session.delete", { sessionId: deleted });
    await expect.poll(() => (model.rows.get(moved)?.seq ?? 0) > seq && !model.rows.has(deleted)).toBe(true);
    link.held.open();
    await loading;

    const { sessions: all } = await client.call("session.list", { limit: 200 });
    const { pinned, recent } = orderSessions(model.rows.values(), model.end);
    const shown = [...pinned, ...recent].map((row) => row.sessionId);
    expect(model.older).toBe(false);
    expect(shown).toEqual(all.map((row) => row.sessionId));
    expect(model.rows.get(moved)?.title).toBe("Renamed while paging");
    expect(shown).not.toContain(deleted);
    // a reload paints the first page from the cache (one page is what it reads), not all of them
    await cache.settled();
    expect((await cache.loadRows()).map((row) => row.sessionId)).toEqual(shown.slice(0, 50));
  });

  it("moves an older dismissed page's sessions off the list, except one restored while the page was read", async () => {
    const alice = createNodeClient({ url: host.wsUrl, token: ALICE_TOKEN });
    try {
      const created: string[] = [];
      for (let i = 1; i <= 55; i++) {
        const { sessionId } = (await alice.create({ title: `Dismissed ${i}` })).header;
        await alice.call("session.dismiss", { sessionId });
        created.push(sessionId);
      }
      const [oldest, restored] = [created[0]!, created[1]!];
      const link = new HeldLink(() => alice, ALICE_TOKEN);
      const cache = new SessionCache("alice", {
        data: createStore("list-model-dismissed", "entries"),
        usage: createStore("list-model-dismissed-usage", "usage"),
      });
      const model = new SessionListModel(link, cache, () => {});
      link.onListChange((change) => model.apply(change));
      await model.refresh();
      expect(model.dismissed.size).toBe(50);
      expect(model.hasOlder("dismissed")).toBe(true);
      // the control stream describes every session, the dismissed ones not loaded yet too
      const { sessions: older } = await alice.call("session.list", { limit: 200, dismissed: true });
      model.project(older.find((row) => row.sessionId === oldest)!);

      const loading = model.loadOlder("dismissed");
      await expect.poll(() => link.olderAnswered).toBe(1);
      await alice.call("session.restore", { sessionId: restored });
      await expect.poll(() => model.rows.has(restored)).toBe(true);
      link.held.open();
      await loading;

      expect(model.hasOlder("dismissed")).toBe(false);
      expect(model.dismissed.size).toBe(54);
      expect(model.dismissed.has(oldest)).toBe(true);
      expect(model.rows.has(oldest)).toBe(false);
      expect(model.rows.has(restored)).toBe(true);
      expect(model.dismissed.has(restored)).toBe(false);
    } finally {
      await alice.close();
    }
  });
});
