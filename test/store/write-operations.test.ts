import Database from "better-sqlite3";
import { afterEach, describe, expect, it } from "vitest";
import { decodeValue } from "../../src/store/event-codec.js";
import type { LiveStateNotice } from "../../src/store/live-state-store.js";
import type { CommitNotice, SessionProjection } from "../../src/store/session-store.js";
import { SqliteSessionStore } from "../../src/store/sqlite-store.js";
import { openTempStore, turnEnd, turnStart, userMessage } from "./open-store.js";

/**
 * The store's writes on a real SQLite file: every refusal is a value that changed nothing, every
 * accepted write tells the listeners exactly what committed (and only then), and the tombstone of
 * a deleted session outlives it. Those promises are checked on every backend by
 * `test/store/contract/write-operations.test.ts`; this file pins what only SQLite shows: the
 * encoded rows listeners are handed, and a rebuild repairing rows damaged in the file.
 */
let env: ReturnType<typeof openTempStore> | undefined;
afterEach(async () => {
  await env?.dispose();
  env = undefined;
});

function open(now = () => 1_000) {
  env = openTempStore({ now });
  const notices: [string, CommitNotice, SessionProjection | null][] = [];
  env.store.subscribeAll((sessionId, notice, projection) => notices.push([sessionId, notice, projection]));
  return { store: env.store, notices };
}

const jobStarted = (jobId: string, turnId: string) => ({
  type: "job/started" as const,
  data: { jobId, label: "build", turnId },
});

describe("append", () => {
  it("hands the listeners each event as the log stores it, its data already encoded", async () => {
    const { store, notices } = open();
    await store.create({ sessionId: "a", owner: "o", model: "m" });
    const appended = await store.append("a", [turnStart("t"), userMessage("hi", "m1")], { at: 5 });
    if (appended.status !== "appended") throw new Error(appended.status);
    const notice = notices.at(-1)?.[1];
    if (notice?.kind !== "append") throw new Error(`last notice: ${notice?.kind}`);
    expect(notice.events).toStrictEqual(appended.events);
    expect(
      notice.stored?.map(([seq, at, type, data]) => [seq, at, type, decodeValue(data as Uint8Array)]),
    ).toStrictEqual(appended.events.map((event) => [event.seq, event.at, event.type, event.data]));
  });
});

describe("jobs and projections", () => {
  it("progress is written to a running job only", async () => {
    const { store } = open();
    await store.create({ sessionId: "a", owner: "o", model: "m" });
    await store.append("a", [turnStart("t1"), jobStarted("j1", "t1")]);
    const live: LiveStateNotice[] = [];
    store.subscribeLive((notice) => live.push(notice));
    expect(await store.setJobProgress("j1", 0.5)).toEqual({ status: "ok" });
    expect(live).toEqual([{ kind: "job.progress", owner: "o", sessionId: "a", jobId: "j1", progress: 0.5 }]);
    expect(await store.setJobProgress("nope", 0.5)).toEqual({ status: "not_found" });
    expect(live).toHaveLength(1);
    await store.append("a", [{ type: "job/ended", data: { jobId: "j1", state: "completed" } }]);
    expect(await store.setJobProgress("j1", 0.9)).toEqual({ status: "not_found" });
  });

  it("rebuilding projections repairs rows that no longer match the log, and every owner's stored bytes", async () => {
    env = openTempStore({ now: () => 1_000 });
    const { path } = env;
    let store: SqliteSessionStore = env.store;
    await store.create({ sessionId: "a", owner: "o", model: "m", title: "A" });
    await store.append("a", [turnStart("t1"), userMessage("hello there"), turnEnd("t1")]);
    await store.create({ sessionId: "b", owner: "p", model: "m" });
    await store.append("b", [turnStart("t1"), userMessage("second")]);
    const before = { a: await store.projection("a"), b: await store.projection("b") };
    const usage = { o: await store.ownerStoredBytes("o"), p: await store.ownerStoredBytes("p") };
    expect(usage.o).toBeGreaterThan(0);
    await store.close();

    const db = new Database(path);
    db.prepare(
      "UPDATE projections SET title = 'damaged', turn_count = 42, message_count = 0, last_state = 'idle'",
    ).run();
    db.prepare("UPDATE owner_usage SET stored_bytes = 7").run();
    db.close();
    store = SqliteSessionStore.open(path, { now: () => 1_000 });
    try {
      expect((await store.projection("a"))?.title).toBe("damaged");
      await store.rebuildProjections();
      expect({ a: await store.projection("a"), b: await store.projection("b") }).toEqual(before);
      expect({ o: await store.ownerStoredBytes("o"), p: await store.ownerStoredBytes("p") }).toEqual(usage);
    } finally {
      await store.close();
    }
  });
});
