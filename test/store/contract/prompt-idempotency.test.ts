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

  it("keeps an explicitly recorded prompt and scopes keys by session", async () => {
    const { store } = await open();
    await store.create({ sessionId: "a", owner: "o", model: "m" });
    await store.recordPrompt("a", "c2", { queued: true, itemId: "q1" });
    await store.recordPrompt("a", "c2", { queued: false, seq: 9 });
    expect(await store.findPrompt("a", "c2")).toEqual({ queued: true, itemId: "q1" });
    expect(await store.findPrompt("b", "c2")).toBeNull();
  });

  it("forgets the keys of a deleted session", async () => {
    const { store } = await open();
    await store.create({ sessionId: "a", owner: "o", model: "m" });
    await store.recordPrompt("a", "c3", { queued: true });
    await store.delete("a");
    expect(await store.findPrompt("a", "c3")).toBeNull();
  });
});
