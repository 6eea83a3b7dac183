import { statSync } from "node:fs";
import { afterEach, describe, expect, it } from "vitest";
import { MAX_THREAD_READS } from "../../src/store/sqlite-read-thread.js";
import { openTempStore, userMessage } from "./open-store.js";

let opened: ReturnType<typeof openTempStore> | undefined;

afterEach(async () => {
  await opened?.dispose();
  opened = undefined;
});

/** Event-loop turns (`setImmediate`) that ran until `work` settled. */
async function turnsWhile(work: Promise<unknown>): Promise<number> {
  let turns = 0;
  let settled = false;
  const done = work.finally(() => {
    settled = true;
  });
  const tick = () => {
    if (settled) return;
    turns++;
    setImmediate(tick);
  };
  setImmediate(tick);
  await done.catch(() => undefined);
  return turns;
}

async function storeWithMessages(sessions: number, perSession: number) {
  opened = openTempStore();
  const { store } = opened;
  for (let s = 0; s < sessions; s++) {
    await store.create({ sessionId: `s${s}`, owner: "alice", model: "m" });
    await store.append(
      `s${s}`,
      Array.from({ length: perSession }, (_, i) => userMessage(`zebra number ${i} of session ${s}`)),
    );
  }
  return opened;
}

describe("a SQLite store searches on a thread of its own", () => {
  it("lets the event loop run while a search ranks its matches", async () => {
    const { store } = await storeWithMessages(20, 100);
    // the first search starts the thread
    await store.search("zebra", 10);
    const search = store.search("zebra", 50, "alice");
    // on the event loop the search would settle before any turn: its statements run in the call
    expect(await turnsWhile(search)).toBeGreaterThan(0);
    expect(await search).toHaveLength(50);
  });

  it("finds a message acknowledged just before it was asked", async () => {
    const { store } = await storeWithMessages(1, 3);
    await store.append("s0", [userMessage("okapi arrived")]);
    expect(await store.search("okapi", 10)).toEqual([
      { sessionId: "s0", seq: 5, snippet: "**okapi** arrived" },
    ]);
  });

  it(`answers overloaded past ${MAX_THREAD_READS} searches at once, and serves again after`, async () => {
    const { store } = await storeWithMessages(2, 50);
    const searches = Array.from({ length: MAX_THREAD_READS + 3 }, () => store.search("zebra", 5));
    const outcomes = await Promise.allSettled(searches);
    const refused = outcomes.filter((o) => o.status === "rejected");
    expect(refused).toHaveLength(3);
    for (const o of refused)
      expect((o as PromiseRejectedResult).reason).toMatchObject({ code: "overloaded" });
    expect(await store.search("zebra", 5)).toHaveLength(5);
  });

  it("closes with a search in flight: the search fails as on a closed store, the WAL is emptied", async () => {
    const { store, path } = await storeWithMessages(5, 100);
    const search = store.search("zebra", 50);
    const closing = store.close();
    await expect(search).rejects.toMatchObject({ code: "host_shutting_down" });
    await closing;
    expect(statSync(`${path}-wal`, { throwIfNoEntry: false })?.size ?? 0).toBe(0);
    await expect(store.search("zebra", 5)).rejects.toMatchObject({ code: "host_shutting_down" });
  });
});
