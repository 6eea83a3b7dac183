import { expect, it } from "vitest";
import { turnStart, userMessage } from "../open-store.js";
import { describeContract, storeFixture } from "./backends.js";

describeContract("prompt idempotency keys", (backend) => {
  const open = storeFixture(backend);
  it("records the prompt with its append and refuses a second append under the same key", async () => {
    const { store } = await open();
    await store.create({ sessionId: "a", owner: "o", model: "m" });
    const prompt = { clientMessageId: "c1", record: { queued: false, turnId: "t1" } };
    const [first, retry] = await Promise.all([
      store.append("a", [turnStart("t1"), userMessage("hi")], { prompt }),
      store.append("a", [turnStart("t1"), userMessage("hi")], { prompt }),
    ]);
    expect(first.status).toBe("appended");
    // the record carries the seq of the stored user/message
    expect(retry).toEqual({ status: "duplicate", record: { queued: false, turnId: "t1", seq: 3 } });
    expect(await store.findPrompt("a", "c1")).toEqual({ queued: false, turnId: "t1", seq: 3 });
    const read = await store.readAfter("a", 0, 10);
    expect(read.status === "ok" && read.headSeq).toBe(3);
  });

  it("gives a prompt's record the seq of its user/message only when it has none and was not queued", async () => {
    const { store } = await open();
    await store.create({ sessionId: "a", owner: "o", model: "m" });
    const cases = [
      // a seq the caller set is kept
      { key: "kept", record: { queued: false, turnId: "t1", seq: 1 }, events: [userMessage("one")] },
      // a queued prompt has no turn's message yet
      { key: "queued", record: { queued: true, itemId: "q1" }, events: [userMessage("two")] },
      // an append without a user/message has no seq to give
      { key: "none", record: { queued: false, turnId: "t3" }, events: [turnStart("t3")] },
      {
        key: "given",
        record: { queued: false, turnId: "t4" },
        events: [turnStart("t4"), userMessage("four")],
      },
    ];
    for (const { key, record, events } of cases) {
      const sent = structuredClone(record);
      const outcome = await store.append("a", events, { prompt: { clientMessageId: key, record } });
      expect(outcome.status).toBe("appended");
      // the caller's record is left as it was
      expect(record).toEqual(sent);
    }
    expect(await store.findPrompt("a", "kept")).toEqual({ queued: false, turnId: "t1", seq: 1 });
    expect(await store.findPrompt("a", "queued")).toEqual({ queued: true, itemId: "q1" });
    expect(await store.findPrompt("a", "none")).toEqual({ queued: false, turnId: "t3" });
    // the creation's event, then seqs 2, 3, 4; the last append's user/message is 6
    expect(await store.findPrompt("a", "given")).toEqual({ queued: false, turnId: "t4", seq: 6 });
  });

  it("keeps an explicitly recorded prompt and scopes keys by session", async () => {
    const { store } = await open();
    await store.create({ sessionId: "a", owner: "o", model: "m" });
    await store.recordPrompt("a", "c2", { queued: true, itemId: "q1" });
    await store.recordPrompt("a", "c2", { queued: false, seq: 9 });
    expect(await store.findPrompt("a", "c2")).toEqual({ queued: true, itemId: "q1" });
    expect(await store.findPrompt("b", "c2")).toBeNull();
  });

  it("keeps the key of a queued prompt taken out of the queue: its retry is a duplicate, not a new item", async () => {
    const { store } = await open();
    await store.create({ sessionId: "a", owner: "o", model: "m" });
    const enqueue = (itemId: string, clientMessageId: string) =>
      store.enqueuePrompt({
        sessionId: "a",
        itemId,
        queuedAt: 1,
        input: { text: clientMessageId, clientMessageId },
      });
    expect(await enqueue("q1", "c1")).toMatchObject({ status: "queued" });
    expect(await enqueue("q2", "c2")).toMatchObject({ status: "queued" });
    await store.removeQueueItem("a", "q1");
    expect(await enqueue("q3", "c1")).toEqual({
      status: "duplicate",
      record: { queued: true, itemId: "q1" },
    });
    await store.clearQueue("a");
    expect(await enqueue("q4", "c2")).toEqual({
      status: "duplicate",
      record: { queued: true, itemId: "q2" },
    });
    expect(await store.queue("a")).toEqual([]);
  });

  it("forgets the keys of a deleted session", async () => {
    const { store } = await open();
    await store.create({ sessionId: "a", owner: "o", model: "m" });
    await store.recordPrompt("a", "c3", { queued: true });
    await store.delete("a");
    expect(await store.findPrompt("a", "c3")).toBeNull();
  });
});
