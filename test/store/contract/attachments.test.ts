import { expect, it } from "vitest";
import { describeContract, storeFixture } from "./backends.js";

describeContract("attachments", (backend) => {
  const open = storeFixture(backend);
  it("stores bytes, links them to the session whose message uses them, and deletes them with it", async () => {
    const { store } = await open();
    const bytes = new Uint8Array([1, 2, 3, 250]);
    const used = await store.putAttachment({
      owner: "o",
      name: "a.bin",
      type: "application/octet-stream",
      bytes,
    });
    const spare = await store.putAttachment({
      owner: "o",
      name: "b.bin",
      type: "text/plain",
      bytes: new Uint8Array(2),
    });
    expect(await store.getAttachment(used)).toEqual({
      attachmentId: used,
      owner: "o",
      sessionId: null,
      name: "a.bin",
      type: "application/octet-stream",
      size: 4,
      bytes,
    });
    await store.create({ sessionId: "s", owner: "o", model: "m" });
    await store.append("s", [
      {
        type: "user/message",
        data: {
          messageId: "m",
          source: "user",
          text: "see file",
          attachments: [{ name: "a.bin", type: "application/octet-stream", size: 4, attachmentId: used }],
          meta: {},
        },
      },
    ]);
    expect((await store.getAttachment(used))?.sessionId).toBe("s");
    await store.delete("s");
    expect(await store.getAttachment(used)).toBeNull();
    // an upload no session used is not the deleted session's to remove
    expect((await store.getAttachment(spare))?.size).toBe(2);
  });

  it("answers null for an unknown id", async () => {
    const { store } = await open();
    expect(await store.getAttachment("nope")).toBeNull();
  });
});
