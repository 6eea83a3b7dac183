import { describe, expect, test } from "vitest";
import type { LiveStateNotice } from "../../../src/store/live-state-store.js";
import type { CommitNotice } from "../../../src/store/session-store.js";
import { readWholeLog } from "../../support/whole-log.js";
import { turnEnd, turnStart, userMessage } from "../open-store.js";
import { type ContractStore, describeContract, storeFixture } from "./backends.js";

/**
 * The changes a queued prompt can go through after it was queued (edit, remove, clear, steer),
 * an answer's event and notice, and a job's progress, on both stores: outcomes as values, nothing
 * written when a change is refused, one queue notice per change.
 */

const S = "queued";

async function withQueue(store: ContractStore, texts: string[]): Promise<void> {
  await store.create({ sessionId: S, owner: "alice", model: "m" });
  for (const [i, text] of texts.entries())
    await store.enqueuePrompt({ sessionId: S, itemId: `q${i + 1}`, queuedAt: i + 1, input: { text } });
}

const textsOf = async (store: ContractStore) => (await store.queue(S)).map((item) => item.input.text);

describeContract("queue changes", (backend) => {
  const open = storeFixture(backend);

  describe("edit, remove, clear", () => {
    test("an edit replaces the text and drops the display text it showed; the outcome lists the queue", async () => {
      const { store } = await open();
      await store.create({ sessionId: S, owner: "alice", model: "m" });
      const queued = await store.enqueuePrompt({
        sessionId: S,
        itemId: "q1",
        queuedAt: 7,
        input: { text: "/approve x", display: "approve x", clientMessageId: "k1" },
      });
      expect(queued).toEqual({
        status: "queued",
        item: {
          itemId: "q1",
          sessionId: S,
          owner: "alice",
          queuedAt: 7,
          input: { text: "/approve x", display: "approve x", clientMessageId: "k1" },
        },
      });
      const edited = await store.editQueueItem(S, "q1", "hello instead");
      const item = { itemId: "q1", sessionId: S, owner: "alice", queuedAt: 7 };
      expect(edited).toEqual({
        status: "ok",
        items: [{ ...item, input: { text: "hello instead", clientMessageId: "k1" } }],
      });
      expect(await store.queue(S)).toEqual([
        { ...item, input: { text: "hello instead", clientMessageId: "k1" } },
      ]);
    });

    test("an unknown item is item_not_found, an unknown or deleted session not_found; nothing changes and nothing is announced", async () => {
      const { store } = await open();
      await withQueue(store, ["one"]);
      await store.create({ sessionId: "gone", owner: "alice", model: "m" });
      await store.delete("gone");
      const notices: LiveStateNotice[] = [];
      store.subscribeLive((notice) => notices.push(notice));
      for (const change of [
        () => store.editQueueItem(S, "nope", "x"),
        () => store.removeQueueItem(S, "nope"),
        () => store.steerQueueItem(S, "nope", "t1"),
      ])
        expect(await change()).toEqual({ status: "item_not_found" });
      for (const sessionId of ["unknown", "gone"])
        for (const change of [
          () => store.editQueueItem(sessionId, "q1", "x"),
          () => store.removeQueueItem(sessionId, "q1"),
          () => store.clearQueue(sessionId),
          () => store.steerQueueItem(sessionId, "q1", "t1"),
        ])
          expect(await change()).toEqual({ status: "not_found" });
      expect(
        await store.enqueuePrompt({ sessionId: "gone", itemId: "x", queuedAt: 1, input: { text: "x" } }),
      ).toEqual({ status: "retired" });
      expect(await textsOf(store)).toEqual(["one"]);
      expect(notices).toEqual([]);
    });

    test("a removal takes one item out, a clear all of them; each change is one queue notice", async () => {
      const { store } = await open();
      await withQueue(store, ["one", "two", "three"]);
      const notices: LiveStateNotice[] = [];
      store.subscribeLive((notice) => notices.push(notice));
      const removed = await store.removeQueueItem(S, "q2");
      expect(removed.status === "ok" ? removed.items.map((i) => i.itemId) : removed).toEqual(["q1", "q3"]);
      expect(await store.editQueueItem(S, "q3", "THREE")).toMatchObject({ status: "ok" });
      expect(await store.clearQueue(S)).toEqual({ status: "ok", items: [] });
      expect(await store.queue(S)).toEqual([]);
      expect(notices.map((n) => (n.kind === "queue" ? n.items.map((i) => i.input.text) : n.kind))).toEqual([
        ["one", "three"],
        ["one", "THREE"],
        [],
      ]);
    });
  });

  describe("the queued bytes an owner may hold", () => {
    test("an edit that grows past the bound is refused and changes nothing; up to it, and any shrinking edit, pass", async () => {
      const { store } = await open();
      await withQueue(store, ["aaaa", "bbbb"]);
      await store.create({ sessionId: "other", owner: "alice", model: "m" });
      await store.enqueuePrompt({ sessionId: "other", itemId: "o1", queuedAt: 1, input: { text: "cc" } });
      // alice holds 4 + 4 + 2 = 10 bytes across her two sessions
      expect(await store.editQueueItem(S, "q1", "aaaaaaa", 12)).toEqual({
        status: "queue_full",
        limit: "bytes_per_owner",
        max: 12,
      });
      expect(await textsOf(store)).toEqual(["aaaa", "bbbb"]);
      // exactly at the bound
      expect(await store.editQueueItem(S, "q1", "aaaaaa", 12)).toMatchObject({ status: "ok" });
      // the bound lowered below what she holds (12): growing is refused, shrinking is not
      expect(await store.editQueueItem(S, "q2", "bbbbb", 8)).toMatchObject({ status: "queue_full" });
      expect(await store.editQueueItem(S, "q2", "bbb", 8)).toMatchObject({ status: "ok" });
      // nor is an edit of the same size
      expect(await store.editQueueItem(S, "q2", "BBB", 8)).toMatchObject({ status: "ok" });
      // another owner's bytes are not hers
      await store.create({ sessionId: "bob's", owner: "bob", model: "m" });
      await store.enqueuePrompt({ sessionId: "bob's", itemId: "b1", queuedAt: 1, input: { text: "b" } });
      expect(await store.editQueueItem("bob's", "b1", "b".repeat(12), 12)).toMatchObject({ status: "ok" });
      expect(await textsOf(store)).toEqual(["aaaaaa", "BBB"]);
    });

    test("a prompt that fills the bound exactly is queued; one byte more is refused", async () => {
      const { store } = await open();
      await withQueue(store, ["aaaa"]);
      const limits = { maxItemsPerSession: 10, maxBytesPerOwner: 10 };
      const over = await store.enqueuePrompt({
        sessionId: S,
        itemId: "q2",
        queuedAt: 2,
        input: { text: "b".repeat(7) },
        limits,
      });
      expect(over).toEqual({ status: "queue_full", limit: "bytes_per_owner", max: 10 });
      const exact = await store.enqueuePrompt({
        sessionId: S,
        itemId: "q2",
        queuedAt: 2,
        input: { text: "b".repeat(6) },
        limits,
      });
      expect(exact.status).toBe("queued");
    });

    test("the display text and inline attachments count, raw bytes or a data: URL; a stored attachment does not", async () => {
      const { store } = await open();
      await store.create({ sessionId: S, owner: "alice", model: "m" });
      // 1 (text) + 2 (display) + 5 (raw bytes) + 9 (data: URL) = 17 bytes
      const input = {
        text: "t",
        display: "dd",
        attachments: [
          { name: "raw.bin", type: "application/octet-stream", bytes: new Uint8Array(5) },
          { name: "url.txt", type: "text/plain", url: "data:,xyz" },
          { name: "stored.png", type: "image/png", attachmentId: "att-1" },
        ],
      };
      const enqueue = (maxBytesPerOwner: number) =>
        store.enqueuePrompt({
          sessionId: S,
          itemId: "q1",
          queuedAt: 1,
          input,
          limits: { maxItemsPerSession: 10, maxBytesPerOwner },
        });
      expect(await enqueue(16)).toEqual({ status: "queue_full", limit: "bytes_per_owner", max: 16 });
      expect((await enqueue(17)).status).toBe("queued");
    });
  });

  test("a steered item moves first", async () => {
    const { store } = await open();
    await withQueue(store, ["one", "two", "three"]);
    await store.append(S, [turnStart("t1"), userMessage("running")]);
    const steered = await store.steerQueueItem(S, "q3", "t1");
    expect(steered.status === "ok" ? steered.items.map((i) => i.itemId) : steered).toEqual([
      "q3",
      "q1",
      "q2",
    ]);
    expect(await textsOf(store)).toEqual(["three", "one", "two"]);
  });

  test("a start that read an item edited since takes nothing (queue_item_gone); one that read it as it is takes it", async () => {
    const { store } = await open();
    await store.create({ sessionId: S, owner: "alice", model: "m" });
    await store.enqueuePrompt({
      sessionId: S,
      itemId: "q1",
      queuedAt: 1,
      input: { text: "/go", display: "go", clientMessageId: "k1" },
    });
    const start = (read: { text: string; display?: string }) =>
      store.append(S, [turnStart("t1"), userMessage(read.text)], {
        dequeue: { itemId: "q1", turnId: "t1", read },
      });
    expect((await store.editQueueItem(S, "q1", "/go")).status).toBe("ok");
    // the edit kept the text but dropped the display text: the item read before it is gone
    expect(await start({ text: "/go", display: "go" })).toEqual({ status: "queue_item_gone" });
    expect((await store.editQueueItem(S, "q1", "/stop")).status).toBe("ok");
    expect(await start({ text: "/go" })).toEqual({ status: "queue_item_gone" });
    const log = await readWholeLog(store, S);
    expect(log.status === "ok" && log.events.map((e) => e.type)).toEqual(["session/created"]);
    expect(await textsOf(store)).toEqual(["/stop"]);
    const taken = await start({ text: "/stop" });
    expect(taken.status).toBe("appended");
    expect(await store.queue(S)).toEqual([]);
    expect(await store.findPrompt(S, "k1")).toEqual({ queued: false, turnId: "t1", seq: 3 });
  });

  test("two prompts with one key in one transaction: the second is the first's duplicate, with nothing rolled back", async () => {
    const { store } = await open();
    await store.create({ sessionId: S, owner: "alice", model: "m" });
    const before = store.stats();
    const prompt = (itemId: string) =>
      store.enqueuePrompt({ sessionId: S, itemId, queuedAt: 1, input: { text: "hi", clientMessageId: "k" } });
    const [first, second] = await Promise.all([prompt("q1"), prompt("q2")]);
    expect(first.status).toBe("queued");
    expect(second).toEqual({ status: "duplicate", record: { queued: true, itemId: "q1" } });
    const after = store.stats();
    expect(after.transactions - before.transactions).toBe(1);
    expect(after.rollbacks).toBe(before.rollbacks);
    expect(await store.queue(S)).toHaveLength(1);
  });

  test("an answer appends interaction/resolved with it, and the session's subscribers are told", async () => {
    const { store } = await open();
    await store.create({ sessionId: S, owner: "alice", model: "m" });
    await store.append(S, [
      turnStart("t1"),
      userMessage("ask"),
      {
        type: "interaction/requested",
        data: { turnId: "t1", interactionId: "i1", kind: "question", question: "?" },
      },
    ]);
    const notices: CommitNotice[] = [];
    store.subscribe(S, (notice) => notices.push(notice));
    const outcome = await store.resolveInteraction("i1", { answer: "42" }, 1234);
    const resolved = {
      seq: 5,
      at: 1234,
      type: "interaction/resolved",
      data: { interactionId: "i1", resolution: { answer: "42" } },
    };
    expect(outcome).toMatchObject({ status: "resolved", events: [resolved], pendingInTurn: 0 });
    expect(notices).toEqual([expect.objectContaining({ kind: "append", events: [resolved] })]);
    const log = await readWholeLog(store, S);
    expect(log.status === "ok" ? log.events.at(-1) : log).toEqual(resolved);
    // an answer is compared by its text: the same again is a repeat, another a conflict
    const interaction = { interactionId: "i1", sessionId: S, turnId: "t1", kind: "question" };
    expect(await store.resolveInteraction("i1", { answer: "42" })).toMatchObject({
      status: "repeat",
      interaction,
    });
    expect(await store.resolveInteraction("i1", { answer: "43" })).toEqual({
      status: "conflict",
      winner: { answer: "42" },
    });
    expect(await store.resolveInteraction("i1", { outcome: "approve" })).toEqual({
      status: "conflict",
      winner: { answer: "42" },
    });
  });

  test("a running job's progress is ok and announced; an unknown or ended job's is not_found", async () => {
    const { store } = await open();
    await store.create({ sessionId: S, owner: "alice", model: "m" });
    await store.append(S, [
      turnStart("t1"),
      userMessage("build"),
      { type: "job/started", data: { jobId: "j1", turnId: "t1", label: "build" } },
    ]);
    const notices: LiveStateNotice[] = [];
    store.subscribeLive((notice) => notices.push(notice));
    expect(await store.setJobProgress("j1", 0.5)).toEqual({ status: "ok" });
    expect(await store.setJobProgress("unknown", 0.5)).toEqual({ status: "not_found" });
    await store.append(S, [{ type: "job/ended", data: { jobId: "j1", state: "completed" } }, turnEnd("t1")]);
    expect(await store.setJobProgress("j1", 0.9)).toEqual({ status: "not_found" });
    expect(notices.filter((n) => n.kind === "job.progress")).toEqual([
      { kind: "job.progress", owner: "alice", sessionId: S, jobId: "j1", progress: 0.5 },
    ]);
  });
});
