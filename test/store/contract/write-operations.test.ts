import { expect, it } from "vitest";
import type { LiveStateNotice } from "../../../src/store/live-state-store.js";
import type { CommitNotice, SessionProjection } from "../../../src/store/session-store.js";
import { turnEnd, turnStart, userMessage } from "../open-store.js";
import { type ContractStore, describeContract, storeFixture } from "./backends.js";

/**
 * The store's writes as every backend must make them: each refusal a value that changed nothing,
 * each accepted write told to the listeners with exactly what committed. The SQLite details stay
 * in test/store/write-operations.test.ts; these are the ones the PostgreSQL write operations
 * (src/store/postgres/pg-write-operations.ts) must keep too.
 */
const jobStarted = (jobId: string, turnId: string) => ({
  type: "job/started" as const,
  data: { jobId, label: "build", turnId },
});

function listen(store: ContractStore): [string, CommitNotice, SessionProjection | null][] {
  const notices: [string, CommitNotice, SessionProjection | null][] = [];
  store.subscribeAll((sessionId, notice, projection) => notices.push([sessionId, notice, projection]));
  return notices;
}

describeContract("write operations", (backend) => {
  const open = storeFixture(backend);

  it("create starts the log with session/created, carrying only what was given, and tells the listeners", async () => {
    const { store } = await open({ now: () => 42 });
    const notices = listen(store);
    const plain = await store.create({ sessionId: "a", owner: "o", model: "m" });
    if (plain.status !== "created") throw new Error(plain.status);
    // strictly: an absent title or origin is no key at all, in the outcome and in the log
    const createdEvent = { seq: 1, at: 42, type: "session/created", data: { model: "m" } };
    expect(plain.events).toStrictEqual([createdEvent]);
    const logged = await store.readAfter("a", 0, 10);
    expect(logged.status === "ok" && logged.events).toStrictEqual([createdEvent]);
    expect(plain.header).toMatchObject({ sessionId: "a", owner: "o", model: "m", createdAt: 42 });
    expect(notices).toEqual([
      [
        "a",
        { kind: "create", epoch: plain.header.epoch, events: plain.events },
        expect.objectContaining({ sessionId: "a", owner: "o" }),
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
    const fullEvent = {
      seq: 1,
      at: 7,
      type: "session/created",
      data: { model: "m", title: "Named", origin: "cli" },
    };
    expect(full.events).toStrictEqual([fullEvent]);
    const loggedFull = await store.readAfter("b", 0, 10);
    expect(loggedFull.status === "ok" && loggedFull.events).toStrictEqual([fullEvent]);
    expect(full.header).toMatchObject({ title: "Named", createdAt: 7 });
    expect(full.header.epoch).not.toBe(plain.header.epoch);
    // a rename is kept from an explicit title only; the default title gives way to the first prompt
    await store.append("a", [turnStart("t"), userMessage("what a day")]);
    await store.append("b", [turnStart("t"), userMessage("what a day")]);
    expect((await store.projection("a"))?.title).not.toBe(plain.header.title);
    expect((await store.projection("b"))?.title).toBe("Named");
  });

  it("create refuses an existing id, and a deleted one for good; delete answers retired and not_found", async () => {
    const { store } = await open();
    const notices = listen(store);
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

  it("a create or fork onto an existing id is told exists even when the owner is at its bound", async () => {
    const { store } = await open();
    await store.create({ sessionId: "a", owner: "o", model: "m" });
    await store.create({ sessionId: "b", owner: "o", model: "m" });
    // a retry of a create that committed must learn that the id is taken, not that the owner is full
    expect(await store.create({ sessionId: "a", owner: "o", model: "m", maxOwnerSessions: 2 })).toEqual({
      status: "exists",
    });
    expect(await store.fork({ sourceId: "a", targetId: "b", owner: "o", maxOwnerSessions: 2 })).toEqual({
      status: "exists",
    });
  });

  it("append answers not_found, retired and epoch_mismatch as values that write nothing", async () => {
    const { store } = await open();
    const notices = listen(store);
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
    const { store } = await open();
    const notices = listen(store);
    await store.create({ sessionId: "a", owner: "o", model: "m" });
    expect(await store.append("a", [])).toMatchObject({ status: "appended", events: [] });
    expect(notices.map(([, n]) => n.kind)).toEqual(["create"]);
  });

  /** A fresh store with session `a` and, in its queue, item `q1` keyed `k1`. */
  async function withKeyedItem() {
    const { store } = await open();
    await store.create({ sessionId: "a", owner: "o", model: "m" });
    await store.enqueuePrompt({
      sessionId: "a",
      itemId: "q1",
      queuedAt: 1,
      input: { clientMessageId: "k1", text: "x" },
    });
    return store;
  }

  it("a queued prompt that starts takes its item out and rewrites its key with the turn and seq", async () => {
    const store = await withKeyedItem();
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
    const store = await withKeyedItem();
    await store.append("a", [turnStart("t1")], { dequeue: { itemId: "q1", turnId: "t1" } });
    expect(await store.findPrompt("a", "k1")).toEqual({ queued: false, turnId: "t1" });
  });

  it("a queued prompt that starts tells the live listeners the queue left behind, once", async () => {
    const { store } = await open();
    await store.create({ sessionId: "a", owner: "o", model: "m" });
    await store.enqueuePrompt({ sessionId: "a", itemId: "q1", queuedAt: 1, input: { text: "x" } });
    await store.enqueuePrompt({ sessionId: "a", itemId: "q2", queuedAt: 2, input: { text: "y" } });
    const live: LiveStateNotice[] = [];
    store.subscribeLive((notice) => live.push(notice));
    await store.append("a", [turnStart("t1"), userMessage("x")], { dequeue: { itemId: "q1", turnId: "t1" } });
    expect(live).toEqual([
      { kind: "queue", sessionId: "a", owner: "o", items: [expect.objectContaining({ itemId: "q2" })] },
    ]);
  });

  it("a delete withdraws each pending interaction and empties a queue, announcing each; with nothing live, nothing", async () => {
    const { store } = await open();
    await store.create({ sessionId: "quiet", owner: "o", model: "m" });
    await store.create({ sessionId: "busy", owner: "o", model: "m" });
    await store.append("busy", [
      turnStart("t1"),
      userMessage("/approve x"),
      {
        type: "interaction/requested",
        data: { turnId: "t1", interactionId: "i1", kind: "approval", action: "x" },
      },
      {
        type: "interaction/requested",
        data: { turnId: "t1", interactionId: "i2", kind: "approval", action: "y" },
      },
    ]);
    await store.enqueuePrompt({ sessionId: "busy", itemId: "q1", queuedAt: 1, input: { text: "later" } });
    const live: LiveStateNotice[] = [];
    store.subscribeLive((notice) => live.push(notice));
    expect(await store.delete("quiet")).toEqual({ status: "deleted" });
    expect(live).toEqual([]);
    expect(await store.delete("busy")).toEqual({ status: "deleted" });
    // the withdrawals in any order (PostgreSQL lists the pending rows unordered), then the queue
    const withdrawn = (id: string) => ({
      kind: "interaction.withdrawn",
      owner: "o",
      sessionId: "busy",
      interactionId: id,
    });
    expect(live).toHaveLength(3);
    expect(live.slice(0, 2)).toEqual(expect.arrayContaining([withdrawn("i1"), withdrawn("i2")]));
    expect(live[2]).toEqual({ kind: "queue", sessionId: "busy", owner: "o", items: [] });
    expect(await store.interaction("i1")).toBeNull();
    expect(await store.queue("busy")).toEqual([]);
  });

  it("fork tells the listeners of the new session with everything it committed", async () => {
    const { store } = await open({ now: () => 30 });
    await store.create({ sessionId: "src", owner: "o", model: "m", title: "Source", at: 1 });
    await store.append("src", [turnStart("t1"), userMessage("hi", "m1")], { at: 2 });
    const notices = listen(store);
    const forked = await store.fork({ sourceId: "src", targetId: "dst", owner: "o" });
    if (forked.status !== "created") throw new Error(forked.status);
    expect(forked.events.map((e) => [e.seq, e.at, e.type])).toEqual([
      [1, 30, "session/created"],
      [2, 2, "turn/start"],
      [3, 2, "user/message"],
      [4, 30, "turn/end"],
    ]);
    expect(forked.events[3]).toStrictEqual({
      seq: 4,
      at: 30,
      type: "turn/end",
      data: { turnId: "t1", state: "interrupted", byFork: true },
    });
    expect(notices).toEqual([
      [
        "dst",
        { kind: "create", epoch: forked.header.epoch, events: forked.events },
        expect.objectContaining({ sessionId: "dst", title: "Source", lastState: "interrupted" }),
      ],
    ]);
  });

  it("ack tells listeners (meta) only when it changed what is unseen; a deleted session is not_found", async () => {
    let clock = 1_000;
    const { store } = await open({ now: () => clock });
    const notices = listen(store);
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

  it("a restart ends running jobs and open turns as interrupted, and tells the listeners", async () => {
    const { store } = await open();
    await store.create({ sessionId: "a", owner: "o", model: "m" });
    await store.append("a", [turnStart("t1"), jobStarted("j1", "t1"), turnEnd("t1")]);
    await store.create({ sessionId: "gone", owner: "o", model: "m" });
    await store.append("gone", [turnStart("t2"), jobStarted("j2", "t2")]);
    await store.delete("gone");
    const notices = listen(store);
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

  it("a restart closes open turns in session id order, whatever order it found them in", async () => {
    const { store } = await open();
    // "z" runs a job, so it may be found first (jobs, then turns); "a" only has an open turn
    await store.create({ sessionId: "z", owner: "o", model: "m" });
    await store.append("z", [turnStart("tz"), jobStarted("jz", "tz")]);
    await store.create({ sessionId: "a", owner: "o", model: "m" });
    await store.append("a", [turnStart("ta")]);
    expect(await store.interruptOpenTurns(9)).toEqual(["a", "z"]);
  });

  it("rebuilding projections from the log keeps every live session's row and skips deleted ones", async () => {
    const { store } = await open();
    await store.create({ sessionId: "a", owner: "o", model: "m", title: "A" });
    await store.append("a", [turnStart("t1"), userMessage("hi"), turnEnd("t1")]);
    await store.create({ sessionId: "gone", owner: "o", model: "m" });
    await store.delete("gone");
    const before = await store.projection("a");
    await store.rebuildProjections();
    expect(await store.projection("a")).toEqual(before);
    expect(await store.projection("gone")).toBeNull();
  });
});
