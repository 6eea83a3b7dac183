import "fake-indexeddb/auto";
import { createStore } from "idb-keyval";
import { beforeAll, describe, expect, it } from "vitest";
import type { SessionRow } from "../../protocol/index.js";
import type { ConsoleLink } from "../../web/src/console-link.js";
import { SessionCache } from "../../web/src/session-cache.js";
import { SessionListModel } from "../../web/src/session-list-model.js";
import { ADMIN_TOKEN } from "../support/host.js";
import { until } from "../support/until.js";
import { useTestHost } from "../support/use-test-host.js";
import { HeldLink } from "./held-link.js";

/**
 * A cleared session's log starts again at seq 0, below the old log's seq: the list's rule that the
 * row with the higher seq wins kept the old row (its turns, its state) after a clear made
 * elsewhere, until a reload. The control stream's row at seq 0 replaces it, and a page read before
 * the clear never brings the old row back.
 */

let caches = 0;
function newModel(link: ConsoleLink): SessionListModel {
  caches += 1;
  const cache = new SessionCache("p", {
    data: createStore(`cleared-row-${caches}`, "entries"),
    usage: createStore(`cleared-row-usage-${caches}`, "usage"),
  });
  return new SessionListModel(link, cache, () => {});
}

describe("console session list: a session cleared elsewhere", () => {
  const testHost = useTestHost();
  let session: string;

  beforeAll(async () => {
    session = (await testHost.client.call("session.create", { title: "Cleared elsewhere" })).header.sessionId;
  }, 60_000);

  /** The host's row of the session, as the control stream projects it. */
  const hostRow = async (): Promise<SessionRow> => {
    const { sessions } = await testHost.client.call("session.list", { limit: 200 });
    const row = sessions.find((r) => r.sessionId === session);
    if (!row) throw new Error("the session is not listed");
    return row;
  };

  /** Prompts the session and waits until its turn ended. */
  const answered = async () => {
    await testHost.client.prompt({ sessionId: session, text: "hello" });
    await until(async () => (await hostRow()).lastState === "completed", 10_000, "the turn ends");
  };

  it("shows the cleared row the control stream projects, and keeps it over a page read before the clear", async () => {
    await answered();
    // newer sessions fill the first page: the one to clear stands on the second
    for (let i = 1; i <= 55; i++) await testHost.client.call("session.create", { title: `Session ${i}` });
    const link = new HeldLink(() => testHost.client, ADMIN_TOKEN);
    const model = newModel(link);
    await model.refresh();
    const loading = model.loadOlder();
    await until(() => link.olderAnswered === 1, 10_000, "the second page is answered");
    expect(model.rows.has(session)).toBe(false);
    const before = await hostRow();
    model.project(before);
    expect(model.rows.get(session)?.turnCount).toBe(1);

    await testHost.client.call("session.clear", { sessionId: session });
    const cleared = await hostRow();
    expect(cleared).toMatchObject({ seq: 0, turnCount: 0, blank: true });
    model.project(cleared);
    expect(model.rows.get(session)).toEqual(cleared);

    // the second page was answered before the clear: its row of the session is the old log's
    link.held.open();
    await loading;
    expect(model.rows.get(session)).toEqual(cleared);

    // the new log's rows follow as usual
    await answered();
    const after = await hostRow();
    model.project(after);
    expect(model.rows.get(session)).toEqual(after);
    expect(after.turnCount).toBe(1);
  }, 60_000);
});
