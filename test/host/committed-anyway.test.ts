import { afterEach, describe, expect, it } from "vitest";
import type { SessionEvent } from "../../protocol/index.js";
import { committedAnyway } from "../../src/host/committed-anyway.js";
import type { SqliteSessionStore } from "../../src/store/sqlite-store.js";
import { openTempStore, turnEnd, turnStart, userMessage } from "../store/open-store.js";

/**
 * The search an append that failed on the store makes for its own events (a real SQLite store):
 * found, exactly its events and the epoch; not found, or the read failing too, nothing.
 */

const opened: Array<{ dispose(): Promise<void> }> = [];
afterEach(async () => {
  for (const it of opened.splice(0)) await it.dispose();
});

async function storeWithSession(): Promise<SqliteSessionStore> {
  const temp = openTempStore();
  opened.push(temp);
  await temp.store.create({ sessionId: "s", owner: "o", model: "m" });
  return temp.store;
}

const startOf = (turnId: string) => (e: SessionEvent) => e.type === "turn/start" && e.data.turnId === turnId;

describe("an append's events looked for among the log's newest", () => {
  it("answers only the append's own events, not those written after it, nor before it", async () => {
    const store = await storeWithSession();
    await store.append("s", [userMessage("before", "m0")]);
    const written = await store.append("s", [turnStart("t1"), userMessage("hi", "m1")]);
    if (written.status !== "appended") throw new Error(written.status);
    await store.append("s", [turnEnd("t1"), userMessage("after", "m2")]);

    const found = await committedAnyway(store, "s", startOf("t1"), 2);
    expect(found).toEqual({ epoch: written.epoch, events: written.events });
    expect(found?.events.map((e) => e.type)).toEqual(["turn/start", "user/message"]);
    const one = await committedAnyway(
      store,
      "s",
      (e) => e.type === "user/message" && e.data.messageId === "m1",
      1,
    );
    expect(one?.events).toEqual(written.events.slice(1));
  });

  it("is undefined when the event is not in the log", async () => {
    const store = await storeWithSession();
    await store.append("s", [turnStart("t1"), turnEnd("t1")]);
    expect(await committedAnyway(store, "s", startOf("t2"), 2)).toBeUndefined();
  });

  it("looks among the newest 500 events only, the oldest of them included", async () => {
    const store = await storeWithSession();
    const written = await store.append("s", [turnStart("old"), turnEnd("old")]);
    if (written.status !== "appended") throw new Error(written.status);
    const fill = (n: number) =>
      store.append(
        "s",
        Array.from({ length: n }, (_, i) => userMessage(`m${i}`, `m${n}-${i}`)),
      );
    // the turn's start the oldest of the newest 500: found, at the page's first place
    await fill(500 - 2);
    expect(await committedAnyway(store, "s", startOf("old"), 2)).toEqual({
      epoch: written.epoch,
      events: written.events,
    });
    // one event more, and it is past the newest 500
    await fill(1);
    expect(await committedAnyway(store, "s", startOf("old"), 2)).toBeUndefined();
    const end = await committedAnyway(store, "s", (e) => e.type === "turn/end", 1);
    expect(end?.events).toEqual(written.events.slice(1));
  });

  it("is undefined for a session the store does not have, and when the read fails", async () => {
    const store = await storeWithSession();
    await store.append("s", [turnStart("t1")]);
    expect(await committedAnyway(store, "gone", startOf("t1"), 1)).toBeUndefined();
    const failing = {
      page: () => Promise.reject(new Error("the store is gone")),
    };
    expect(await committedAnyway(failing, "s", startOf("t1"), 1)).toBeUndefined();
  });
});
