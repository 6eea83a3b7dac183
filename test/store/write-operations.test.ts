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
 * a deleted session outlives it. The contract suite (test/store/contract) checks the same
 * promises on every backend; this file pins the details of the SQLite write operations.
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

describe("create", () => {
  it("starts the log with session/created, carrying only what was given, and tells the listeners", async () => {
    const { store, notices } = open(() => 42);
    const plain = await store.create({ sessionId: "a", owner: "o", model: "m" });
    if (plain.status !== "created") throw new Error(plain.status);
    // strictly: an absent title or origin is no key at all, on the wire and in the log
    const createdEvent = { seq: 1, at: 42, type: "session/created", data: { model: "m" } };
    expect(plain.events).toStrictEqual([createdEvent]);
    const logged = await store.readAfter("a", 0, 10);
    expect(logged.status === "ok" && logged.events).toStrictEqual([createdEvent]);
    expect(plain.header).toMatchObject({ sessionId: "a", owner: "o", model: "m", createdAt: 42 });
    expect(plain.header.title).not.toBe("");
    expect(notices).toEqual([
      [
        "a",
        { kind: "create", epoch: plain.header.epoch, events: plain.events },
        expect.objectContaining({ sessionId: "a" }),
      ],
    ]);

    const full = await store.create({
      sessionId: "b",
      owner: "o",
      model: "m",
      title: "Named",
      origin: "cli",
      at: 7,
    });
    if (full.status !== "created") throw new Error(full.status);
    expect(full.events[0]).toEqual({
      seq: 1,
      at: 7,
      type: "session/created",
      data: { model: "m", title: "Named", origin: "cli" },
    });
    expect(full.header.title).toBe("Named");
    expect(full.header.epoch).not.toBe(plain.header.epoch);
    // a rename is kept from an explicit title only; the default title gives way to the first prompt
    await store.append("a", [turnStart("t"), userMessage("what a day")]);
    await store.append("b", [turnStart("t"), userMessage("what a day")]);
    expect((await store.projection("a"))?.title).not.toBe(plain.header.title);
    expect((await store.projection("b"))?.title).toBe("Named");
  });

  it("refuses an existing id, and a deleted one for good (its tombstone)", async () => {
    const { store, notices } = open();
    await store.create({ sessionId: "a", owner: "o", model: "m" });
    expect(await store.create({ sessionId: "a", owner: "x", model: "m" })).toEqual({ status: "exists" });
    expect(await store.delete("a")).toEqual({ status: "deleted" });
    expect(await store.create({ sessionId: "a", owner: "o", model: "m" })).toEqual({ status: "retired" });
    expect(await store.delete("a")).toEqual({ status: "retired" });
    expect(await store.delete("never")).toEqual({ status: "not_found" });
    expect(notices.map(([id, n, p]) => [id, n.kind, p === null])).toEqual([
      ["a", "create", false],
      ["a", "delete", true],
    ]);
    expect(await store.isRetired("a")).toBe(true);
  });
});

describe("append", () => {
  it("answers not_found, retired and epoch_mismatch as values that write nothing", async () => {
    const { store, notices } = open();
    expect(await store.append("nobody", [turnStart("t")])).toEqual({ status: "not_found" });
    const created = await store.create({ sessionId: "a", owner: "o", model: "m" });
    if (created.status !== "created") throw new Error(created.status);
    expect(await store.append("a", [turnStart("t")], { expectedEpoch: "stale" })).toEqual({
      status: "epoch_mismatch",
      epoch: created.header.epoch,
    });
    const ok = await store.append("a", [turnStart("t")], { expectedEpoch: created.header.epoch, at: 5 });
    expect(ok).toEqual({
      status: "appended",
      epoch: created.header.epoch,
      events: [{ seq: 2, at: 5, type: "turn/start", data: { turnId: "t", trigger: "prompt" } }],
    });
    await store.delete("a");
    expect(await store.append("a", [turnEnd("t")])).toEqual({ status: "retired" });
    expect(notices.map(([, n]) => n.kind)).toEqual(["create", "append", "delete"]);
  });

  it("an append of no events commits nothing anyone is told about", async () => {
    const { store, notices } = open();
    await store.create({ sessionId: "a", owner: "o", model: "m" });
    expect(await store.append("a", [])).toMatchObject({ status: "appended", events: [] });
    expect(notices.map(([, n]) => n.kind)).toEqual(["create"]);
  });

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

  it("a queued prompt that starts takes its item out and rewrites its key with the turn and seq", async () => {
    const { store } = open();
    await store.create({ sessionId: "a", owner: "o", model: "m" });
    await store.enqueuePrompt({
      sessionId: "a",
      itemId: "q1",
      queuedAt: 1,
      input: { clientMessageId: "k1", text: "x" },
    });
    await store.enqueuePrompt({ sessionId: "a", itemId: "q2", queuedAt: 2, input: { text: "y" } });
    const started = await store.append("a", [turnStart("t1"), userMessage("x")], {
      dequeue: { itemId: "q1", turnId: "t1" },
    });
    expect(started.status).toBe("appended");
    expect(await store.findPrompt("a", "k1")).toEqual({ queued: false, turnId: "t1", seq: 3 });
    expect((await store.queue("a")).map((i) => i.itemId)).toEqual(["q2"]);
    // the item is gone: starting it again appends nothing
    expect(await store.append("a", [turnStart("t9")], { dequeue: { itemId: "q1", turnId: "t9" } })).toEqual({
      status: "queue_item_gone",
    });
    // an item without a key, steered into a running turn without a user/message: no key to rewrite
    await store.append("a", [turnEnd("t1")]);
    expect(
      await store.append("a", [turnStart("t2")], { dequeue: { itemId: "q2", turnId: "t2" } }),
    ).toMatchObject({ status: "appended" });
    expect(await store.queue("a")).toEqual([]);
    const read = await store.readAfter("a", 0, 100);
    expect(read.status === "ok" && read.headSeq).toBe(5);
  });

  it("a keyed queued prompt started without a user/message keeps its turn and no seq", async () => {
    const { store } = open();
    await store.create({ sessionId: "a", owner: "o", model: "m" });
    await store.enqueuePrompt({
      sessionId: "a",
      itemId: "q1",
      queuedAt: 1,
      input: { clientMessageId: "k1", text: "x" },
    });
    await store.append("a", [turnStart("t1")], { dequeue: { itemId: "q1", turnId: "t1" } });
    expect(await store.findPrompt("a", "k1")).toEqual({ queued: false, turnId: "t1" });
  });
});

describe("fork", () => {
  it("tells the listeners of the new session with everything it committed", async () => {
    const { store, notices } = open(() => 30);
    await store.create({ sessionId: "src", owner: "o", model: "m", title: "Source", at: 1 });
    await store.append("src", [turnStart("t1"), userMessage("hi", "m1")], { at: 2 });
    notices.length = 0;
    const forked = await store.fork({ sourceId: "src", targetId: "dst", owner: "o" });
    if (forked.status !== "created") throw new Error(forked.status);
    expect(forked.events.map((e) => [e.seq, e.type])).toEqual([
      [1, "session/created"],
      [2, "turn/start"],
      [3, "user/message"],
      [4, "turn/end"],
    ]);
    expect(forked.events[3]).toStrictEqual({
      seq: 4,
      at: 30,
      type: "turn/end",
      data: { turnId: "t1", state: "interrupted" },
    });
    expect(notices).toEqual([
      [
        "dst",
        { kind: "create", epoch: forked.header.epoch, events: forked.events },
        expect.objectContaining({ sessionId: "dst", title: "Source", lastState: "interrupted" }),
      ],
    ]);
  });
});

describe("ack", () => {
  it("tells listeners (meta) only when it changed what is unseen; a deleted session is not_found", async () => {
    let clock = 1_000;
    const { store, notices } = open(() => clock);
    await store.create({ sessionId: "a", owner: "o", model: "m" });
    expect(await store.ack("a", 5)).toEqual({ status: "ok", hasUnseenCompletion: false });
    await store.append("a", [turnStart("t1"), turnEnd("t1")]);
    clock = 2_000;
    expect(await store.ack("a", 999)).toEqual({ status: "ok", hasUnseenCompletion: true });
    expect(notices.map(([, n]) => n.kind)).toEqual(["create", "append"]);
    expect(await store.ack("a", 1_000)).toEqual({ status: "ok", hasUnseenCompletion: false });
    expect(notices.map(([, n]) => n.kind)).toEqual(["create", "append", "meta"]);
    expect(notices.at(-1)?.[2]).toMatchObject({ hasUnseenCompletion: false });
    // the same ack again, and one older than what it acked, change nothing and tell nobody
    expect(await store.ack("a", 1_000)).toEqual({ status: "ok", hasUnseenCompletion: false });
    expect(await store.ack("a", 2_000)).toEqual({ status: "ok", hasUnseenCompletion: false });
    await store.append("a", [turnStart("t2"), turnEnd("t2")]);
    expect(await store.ack("a", 1_500)).toEqual({ status: "ok", hasUnseenCompletion: true });
    expect(notices.map(([, n]) => n.kind)).toEqual(["create", "append", "meta", "append"]);
    await store.delete("a");
    expect(await store.ack("a", 1_000)).toEqual({ status: "not_found" });
  });
});

describe("jobs and restarts", () => {
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

  it("a restart ends running jobs and open turns as interrupted, and tells the listeners", async () => {
    const { store, notices } = open();
    await store.create({ sessionId: "a", owner: "o", model: "m" });
    await store.append("a", [turnStart("t1"), jobStarted("j1", "t1"), turnEnd("t1")]);
    await store.create({ sessionId: "gone", owner: "o", model: "m" });
    await store.append("gone", [turnStart("t2"), jobStarted("j2", "t2")]);
    await store.delete("gone");
    notices.length = 0;
    expect(await store.interruptOpenTurns(9)).toEqual([]);
    expect(
      notices.map(([id, n]) => [id, n.kind === "append" ? n.events.map((e) => [e.type, e.data]) : n.kind]),
    ).toEqual([["a", [["job/ended", { jobId: "j1", state: "interrupted" }]]]]);
    const read = await store.readAfter("a", 4, 10);
    expect(read.status === "ok" && read.events).toEqual([
      { seq: 5, at: 9, type: "job/ended", data: { jobId: "j1", state: "interrupted" } },
    ]);
    expect(await store.setJobProgress("j1", 0.1)).toEqual({ status: "not_found" });
  });

  it("rebuilding projections from the log keeps every live session's row and skips deleted ones", async () => {
    const { store } = open();
    await store.create({ sessionId: "a", owner: "o", model: "m", title: "A" });
    await store.append("a", [turnStart("t1"), userMessage("hi"), turnEnd("t1")]);
    await store.create({ sessionId: "gone", owner: "o", model: "m" });
    await store.delete("gone");
    const before = await store.projection("a");
    await store.rebuildProjections();
    expect(await store.projection("a")).toEqual(before);
    expect(await store.projection("gone")).toBeNull();
  });

  it("a restart closes open turns in session id order, whatever order it found them in", async () => {
    const { store } = open();
    // "z" runs a job, so it is found first (jobs, then turns); "a" only has an open turn
    await store.create({ sessionId: "z", owner: "o", model: "m" });
    await store.append("z", [turnStart("tz"), jobStarted("jz", "tz")]);
    await store.create({ sessionId: "a", owner: "o", model: "m" });
    await store.append("a", [turnStart("ta")]);
    expect(await store.interruptOpenTurns(9)).toEqual(["a", "z"]);
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
