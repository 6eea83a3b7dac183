import { afterEach, describe, expect, it } from "vitest";
import { shapeUserMessage } from "../../src/store/user-message-shape.js";
import { openTempStore } from "./open-store.js";

let current: ReturnType<typeof openTempStore> | undefined;
afterEach(async () => {
  await current?.dispose();
  current = undefined;
});

describe("shapeUserMessage", () => {
  it("caps text at 16,000 characters", () => {
    const shaped = shapeUserMessage({ messageId: "m", source: "user", text: "x".repeat(20_000) });
    expect(shaped.text.length).toBe(16_000);
  });

  it("stores the display text instead of the model-facing text", () => {
    const shaped = shapeUserMessage({
      messageId: "m",
      source: "user",
      text: "long expanded prompt",
      display: "/short",
    });
    expect(shaped.text).toBe("/short");
  });

  it("stores no text for a hidden message", () => {
    expect(shapeUserMessage({ messageId: "m", source: "server", text: "secret", hidden: true })).toEqual({
      messageId: "m",
      source: "server",
      text: "",
      hidden: true,
      attachments: [],
      meta: {},
    });
  });

  it("keeps attachment shells and records inline bytes as omittedBytes", () => {
    const shaped = shapeUserMessage({
      messageId: "m",
      source: "user",
      text: "see",
      attachments: [
        { name: "a.png", type: "image/png", bytes: new Uint8Array(1234) },
        { name: "b.pdf", type: "application/pdf", attachmentId: "att1", size: 99 },
        { name: "c", type: "text/html", url: "https://example.invalid/c" },
      ],
    });
    expect(shaped.attachments).toEqual([
      { name: "a.png", type: "image/png", size: 1234, omittedBytes: 1234 },
      { name: "b.pdf", type: "application/pdf", size: 99, attachmentId: "att1" },
      { name: "c", type: "text/html", size: 0, url: "https://example.invalid/c" },
    ]);
  });

  it("keeps only the metadata a transcript reads back", () => {
    const shaped = shapeUserMessage({
      messageId: "m",
      source: "user",
      text: "t",
      interjection: true,
      meta: { incognito: true, hidden: false, hitlResume: true, origin: "cli", secret: "k", token: 1 },
    });
    expect(shaped.meta).toEqual({ incognito: true, hidden: false, hitlResume: true, origin: "cli" });
    expect(shaped.interjection).toBe(true);
  });

  it("is idempotent: shaping a shaped message changes nothing", () => {
    const once = shapeUserMessage({
      messageId: "m",
      source: "user",
      text: "x".repeat(17_000),
      attachments: [{ name: "a", type: "t", bytes: new Uint8Array(3) }],
      meta: { origin: "o", junk: true },
    });
    expect(shapeUserMessage(once)).toEqual(once);
  });

  it("is applied by append, so nothing unshaped is stored", async () => {
    current = openTempStore();
    const { store } = current;
    await store.create({ sessionId: "a", owner: "o", model: "m" });
    const raw = {
      messageId: "m",
      source: "user",
      text: "y".repeat(20_000),
      attachments: [{ name: "a", type: "t", size: 0, bytes: new Uint8Array(7) }],
      meta: { origin: "web", apiKey: "leak" },
    };
    // the host may pass anything that claims to be a user message
    await store.append("a", [{ type: "user/message", data: raw as never }]);
    const read = await store.readAfter("a", 1, 10);
    if (read.status !== "ok") throw new Error(read.status);
    const data = read.events[0]!.data as Record<string, unknown>;
    expect((data.text as string).length).toBe(16_000);
    expect(data.attachments).toEqual([{ name: "a", type: "t", size: 7, omittedBytes: 7 }]);
    expect(data.meta).toEqual({ origin: "web" });
  });
});
