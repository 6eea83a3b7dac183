import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { SqliteSessionStore } from "../../src/store/sqlite-store.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { openTempStore, turnStart, userMessage } from "./open-store.js";

/** The SQLite live-state rows beyond the store contract: who owns them, and a page over damaged rows. */

const cleanups = cleanupsAfterEach();

function tempStore(): ReturnType<typeof openTempStore> {
  const opened = openTempStore();
  cleanups.push(() => opened.dispose());
  return opened;
}

function liveOwners(path: string): unknown[] {
  const db = new Database(path, { readonly: true });
  try {
    return db
      .prepare("SELECT session_id, host_id, generation, since FROM live_owners ORDER BY session_id")
      .all();
  } finally {
    db.close();
  }
}

describe("live state owners", () => {
  it("records the host that took over as owner of live state written after, until another generation takes over", async () => {
    const { store, path } = tempStore();
    for (const sessionId of ["before", "queued", "parked"])
      await store.create({ sessionId, owner: "alice", model: "m" });
    // no host has taken over yet: nobody to record
    await store.enqueuePrompt({ sessionId: "before", itemId: "b", queuedAt: 1, input: { text: "b" } });
    await store.removeQueueItem("before", "b");
    expect(liveOwners(path)).toEqual([]);

    await store.takeOverLiveState({ hostId: "h1", generation: "g1" }, 2);
    await store.enqueuePrompt({ sessionId: "queued", itemId: "q1", queuedAt: 5, input: { text: "one" } });
    await store.append("parked", [
      turnStart("t1"),
      userMessage("/approve x"),
      {
        type: "interaction/requested",
        data: { turnId: "t1", interactionId: "i1", kind: "approval", action: "x" },
      },
    ]);
    const requestedAt = (await store.interaction("i1"))?.interaction.requestedAt;
    // the same generation again keeps the time it first took the session
    await store.enqueuePrompt({ sessionId: "queued", itemId: "q2", queuedAt: 9, input: { text: "two" } });
    expect(liveOwners(path)).toEqual([
      { session_id: "parked", host_id: "h1", generation: "g1", since: requestedAt },
      { session_id: "queued", host_id: "h1", generation: "g1", since: 5 },
    ]);

    await store.takeOverLiveState({ hostId: "h2", generation: "g2" }, 20);
    await store.enqueuePrompt({ sessionId: "before", itemId: "b2", queuedAt: 30, input: { text: "b" } });
    expect(liveOwners(path)).toEqual([
      { session_id: "before", host_id: "h2", generation: "g2", since: 30 },
      { session_id: "parked", host_id: "h2", generation: "g2", since: 20 },
      { session_id: "queued", host_id: "h2", generation: "g2", since: 20 },
    ]);
  });
});

describe("a live state page over a damaged file", () => {
  it("skips a queued prompt whose session has no projection and lists the others", async () => {
    const { store, path } = tempStore();
    for (const sessionId of ["a", "orphan", "z"]) {
      await store.create({ sessionId, owner: "alice", model: "m" });
      await store.enqueuePrompt({ sessionId, itemId: "q", queuedAt: 1, input: { text: sessionId } });
    }
    await store.close();
    // what a file edited by hand (or an old bug) can hold: queue rows of a session without its projection
    const db = new Database(path);
    db.prepare("DELETE FROM projections WHERE session_id = 'orphan'").run();
    db.close();

    const reopened = SqliteSessionStore.open(path);
    cleanups.push(() => reopened.close());
    const page = await reopened.liveStatePage(null, 10);

    expect(page.sessions.map((s) => [s.sessionId, s.queue.map((i) => i.input.text)])).toEqual([
      ["a", ["a"]],
      ["z", ["z"]],
    ]);
  });
});
