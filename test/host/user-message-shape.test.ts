import { afterEach, describe, expect, it, vi } from "vitest";
import type { EventDataOf } from "../../protocol/index.js";
import type { AgentDriver, TurnContext } from "../../src/agents/agent.js";
import { ADMIN } from "../../src/host/principal.js";
import { promptMessage, shapeUserMessage } from "../../src/host/user-message-shape.js";
import { errorCode, type HostFixture, openHost, readLog, turnEvents } from "./host-fixture.js";

let fx: HostFixture | undefined;
afterEach(async () => {
  await fx?.dispose();
  fx = undefined;
});

/** An agent that records what each turn received and finishes at once. */
function recordingAgent(): AgentDriver & { prompts: TurnContext["prompt"][] } {
  const prompts: TurnContext["prompt"][] = [];
  return {
    name: "recording",
    defaultModel: "m",
    models: () => [{ id: "m", label: "m" }],
    prompts,
    async runTurn(turn) {
      prompts.push(turn.prompt);
      return { state: "completed" };
    },
  };
}

async function storedMessage(sessionId: string, turnId: string): Promise<EventDataOf<"user/message">> {
  const events = await turnEvents(fx!.store, sessionId, turnId);
  const message = events.find((e) => e.type === "user/message");
  if (message?.type !== "user/message") throw new Error("no user/message in the turn");
  return message.data;
}

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
});

describe("shapeUserMessage, field by field", () => {
  it("keeps a plain message as exactly its fields: no hidden or interjection flag it was not given", () => {
    expect(shapeUserMessage({ messageId: "m", source: "user", text: "hi" })).toStrictEqual({
      messageId: "m",
      source: "user",
      text: "hi",
      attachments: [],
      meta: {},
    });
  });

  it("marks an interjection only when it is one", () => {
    const base = { messageId: "m", source: "user", text: "hi" } as const;
    expect(shapeUserMessage({ ...base, interjection: true })).toStrictEqual({
      ...base,
      interjection: true,
      attachments: [],
      meta: {},
    });
    expect(shapeUserMessage({ ...base, interjection: false })).toStrictEqual({
      ...base,
      attachments: [],
      meta: {},
    });
  });

  it("keeps text of exactly 16,000 characters whole, whatever its last character", () => {
    const text = `${"x".repeat(15_999)}\ud83d`;
    expect(shapeUserMessage({ messageId: "m", source: "user", text }).text).toBe(text);
  });

  it("cuts a longer text at 16,000 characters, or one short of that where a surrogate pair straddles the cut", () => {
    const head = "x".repeat(15_999);
    const cut = (text: string) => shapeUserMessage({ messageId: "m", source: "user", text }).text;
    // U+10000 and U+10FFFF: the lowest and highest high surrogate
    expect(cut(`${head}\u{10000}tail`)).toBe(head);
    expect(cut(`${head}\u{10FFFF}tail`)).toBe(head);
    // a pair that ends at the cut, and a plain character above the surrogates, stay
    const pairAtCut = `${"x".repeat(15_998)}\u{1F600}`;
    expect(cut(`${pairAtCut}tail`)).toBe(pairAtCut);
    expect(cut(`${head}\uff01tail`)).toBe(`${head}\uff01`);
    expect(cut("y".repeat(16_001))).toBe("y".repeat(16_000));
  });

  it("keeps only the keys an attachment shell or the metadata was given", () => {
    const shaped = shapeUserMessage({
      messageId: "m",
      source: "user",
      text: "see",
      attachments: [
        { name: "a", type: "text/plain", size: 4 },
        { name: "b", type: "text/plain", attachmentId: "att" },
        { name: "c", type: "text/plain", url: "https://example.invalid/c" },
        { name: "d", type: "text/plain", bytes: new Uint8Array(2) },
      ],
      meta: { origin: "scheduler", apiKey: "k" } as never,
    });
    expect(shaped.attachments).toStrictEqual([
      { name: "a", type: "text/plain", size: 4 },
      { name: "b", type: "text/plain", size: 0, attachmentId: "att" },
      { name: "c", type: "text/plain", size: 0, url: "https://example.invalid/c" },
      { name: "d", type: "text/plain", size: 2, omittedBytes: 2 },
    ]);
    expect(shaped.meta).toStrictEqual({ origin: "scheduler" });
  });
});

describe("promptMessage", () => {
  it("records a user's prompt under a fresh message id, with its display, hidden flag and metadata", () => {
    const a = promptMessage({ text: "expanded", display: "/short", meta: { voiceInput: true } }, []);
    const b = promptMessage({ text: "expanded" }, []);
    expect(a).toStrictEqual({
      messageId: expect.any(String),
      source: "user",
      text: "/short",
      attachments: [],
      meta: { voiceInput: true },
    });
    expect(b).toStrictEqual({
      messageId: expect.any(String),
      source: "user",
      text: "expanded",
      attachments: [],
      meta: {},
    });
    expect(a.messageId).not.toBe(b.messageId);
    expect(promptMessage({ text: "secret", hidden: true }, [])).toStrictEqual({
      messageId: expect.any(String),
      source: "user",
      text: "",
      hidden: true,
      attachments: [],
      meta: {},
    });
  });

  it("marks the message an interjection only when the prompt was taken into a running turn", () => {
    const shells = [{ name: "n", type: "t", attachmentId: "att", size: 3 }];
    expect(promptMessage({ text: "now" }, shells, true)).toStrictEqual({
      messageId: expect.any(String),
      source: "user",
      text: "now",
      interjection: true,
      attachments: [{ name: "n", type: "t", size: 3, attachmentId: "att" }],
      meta: {},
    });
    expect(promptMessage({ text: "now" }, [], false)).not.toHaveProperty("interjection");
  });
});

describe("a prompt's stored user/message (shaped once, by the host)", () => {
  it("records any inline payload, raw bytes or a data: URL, as omittedBytes in a plain shell", async () => {
    const agent = recordingAgent();
    fx = await openHost({ agent });
    await fx.host.call(ADMIN, "session.create", { sessionId: "inline" });
    const dataUrl = `data:text/plain;base64,${Buffer.from("hello").toString("base64")}`;
    const r = await fx.host.call(ADMIN, "session.prompt", {
      sessionId: "inline",
      text: "see",
      clientMessageId: "c1",
      attachments: [
        { name: "raw.bin", type: "application/octet-stream", bytes: new Uint8Array([1, 2, 3]) },
        { name: "note.txt", type: "", url: dataUrl },
        { name: "pct.txt", type: "text/plain", url: "data:,a%20b" },
        { name: "link", type: "text/html", url: "https://example.invalid/page" },
      ],
    });
    const shells = (await storedMessage("inline", r.turnId!)).attachments;
    expect(shells).toEqual([
      {
        name: "raw.bin",
        type: "application/octet-stream",
        size: 3,
        omittedBytes: 3,
        attachmentId: expect.any(String),
      },
      { name: "note.txt", type: "text/plain", size: 5, omittedBytes: 5, attachmentId: expect.any(String) },
      { name: "pct.txt", type: "text/plain", size: 3, omittedBytes: 3, attachmentId: expect.any(String) },
      { name: "link", type: "text/html", size: 0, url: "https://example.invalid/page" },
    ]);
    expect(JSON.stringify(await readLog(fx.store, "inline"))).not.toContain("data:");
    const kept = await fx.store.getAttachment(shells[1]!.attachmentId!);
    expect(Buffer.from(kept!.bytes).toString()).toBe("hello");
    expect(agent.prompts[0]!.attachments.map((a) => a.bytes && Buffer.from(a.bytes).toString())).toEqual([
      "\u0001\u0002\u0003",
      "hello",
      "a b",
      undefined,
    ]);
  });

  it("links an uploaded attachment by id: the log keeps its id and size, the agent gets its bytes", async () => {
    const agent = recordingAgent();
    fx = await openHost({ agent });
    await fx.host.call(ADMIN, "session.create", { sessionId: "linked" });
    const bytes = new TextEncoder().encode("uploaded");
    const attachmentId = await fx.store.putAttachment({
      owner: "admin",
      name: "up.txt",
      type: "text/plain",
      bytes,
    });
    const r = await fx.host.call(ADMIN, "session.prompt", {
      sessionId: "linked",
      text: "see",
      clientMessageId: "c1",
      attachments: [{ name: "mine.txt", type: "text/x-mine", attachmentId }],
    });
    expect((await storedMessage("linked", r.turnId!)).attachments).toStrictEqual([
      { name: "mine.txt", type: "text/x-mine", size: 8, attachmentId },
    ]);
    expect(agent.prompts).toStrictEqual([
      { text: "see", attachments: [{ name: "mine.txt", type: "text/x-mine", size: 8, bytes }] },
    ]);
  });

  it("refuses a missing upload or another owner's with attachment_not_found, and records nothing", async () => {
    const agent = recordingAgent();
    fx = await openHost({ agent });
    await fx.host.call(ADMIN, "session.create", { sessionId: "unlinked" });
    const before = await readLog(fx.store, "unlinked");
    const bytes = new Uint8Array([1]);
    const theirs = await fx.store.putAttachment({ owner: "bob", name: "b", type: "x/y", bytes });
    for (const attachmentId of [theirs, "no-such-upload"]) {
      const prompting = fx.host.call(ADMIN, "session.prompt", {
        sessionId: "unlinked",
        text: "see",
        clientMessageId: attachmentId,
        attachments: [{ name: "b", type: "x/y", attachmentId }],
      });
      await expect(prompting).rejects.toMatchObject({
        code: "attachment_not_found",
        message: `no attachment ${attachmentId}; upload it first`,
        data: { attachmentId },
      });
    }
    expect(await readLog(fx.store, "unlinked")).toEqual(before);
    expect(agent.prompts).toEqual([]);
  });

  it("hands the agent a link as a link, a shell as a shell, and no attachments when the prompt has none", async () => {
    const agent = recordingAgent();
    fx = await openHost({ agent });
    await fx.host.call(ADMIN, "session.create", { sessionId: "shells" });
    const first = await fx.host.call(ADMIN, "session.prompt", {
      sessionId: "shells",
      text: "see",
      clientMessageId: "c1",
      attachments: [
        { name: "link", type: "text/html", url: "https://example.invalid/page" },
        { name: "relative", type: "image/png", url: "images/a.png" },
        { name: "named only", type: "text/plain" },
      ],
    });
    expect((await storedMessage("shells", first.turnId!)).attachments).toStrictEqual([
      { name: "link", type: "text/html", size: 0, url: "https://example.invalid/page" },
      { name: "relative", type: "image/png", size: 0, url: "images/a.png" },
      { name: "named only", type: "text/plain", size: 0 },
    ]);
    await vi.waitFor(() => expect(fx!.host.live.isRunning("shells")).toBe(false));
    const second = await fx.host.call(ADMIN, "session.prompt", {
      sessionId: "shells",
      text: "plain",
      clientMessageId: "c2",
    });
    expect((await storedMessage("shells", second.turnId!)).attachments).toStrictEqual([]);
    expect(agent.prompts).toStrictEqual([
      {
        text: "see",
        attachments: [
          { name: "link", type: "text/html", size: 0, url: "https://example.invalid/page" },
          { name: "relative", type: "image/png", size: 0, url: "images/a.png" },
          { name: "named only", type: "text/plain", size: 0 },
        ],
      },
      { text: "plain", attachments: [] },
    ]);
  });

  it("refuses an undecodable data: URL with bad_request naming the field, and records nothing", async () => {
    fx = await openHost({ agent: recordingAgent() });
    await fx.host.call(ADMIN, "session.create", { sessionId: "bad" });
    const before = await readLog(fx.store, "bad");
    const failure = await errorCode(() =>
      fx!.host.call(ADMIN, "session.prompt", {
        sessionId: "bad",
        text: "see",
        clientMessageId: "c1",
        attachments: [{ name: "x", type: "text/plain", url: "data:text/plain;base64,@@@" }],
      }),
    );
    expect(failure).toEqual({ code: "bad_request", data: { field: "/attachments/0/url" } });
    await expect(
      fx.host.call(ADMIN, "session.prompt", {
        sessionId: "bad",
        text: "see",
        clientMessageId: "c2",
        attachments: [{ name: "x", type: "text/plain", url: "data:text/plain;base64,@@@" }],
      }),
    ).rejects.toThrow(
      "the attachment's data: URL cannot be decoded; send valid base64 or percent-encoded data",
    );
    expect(await readLog(fx.store, "bad")).toEqual(before);
  });

  it("records the whitelisted message metadata a prompt carries, on a started and on a queued prompt", async () => {
    fx = await openHost();
    await fx.host.call(ADMIN, "session.create", { sessionId: "meta" });
    const meta = {
      incognito: true,
      hitlResume: true,
      voiceInput: true,
      voiceDurationMs: 4200,
      voiceLanguage: "en-GB",
    };
    const [first, queued] = await Promise.all([
      fx.host.call(ADMIN, "session.prompt", {
        sessionId: "meta",
        text: "/sleep 50",
        clientMessageId: "a",
        meta,
      }),
      fx.host.call(ADMIN, "session.prompt", {
        sessionId: "meta",
        text: "later",
        clientMessageId: "b",
        meta: { origin: "scheduler" },
      }),
    ]);
    expect(queued.queued).toBe(true);
    expect((await storedMessage("meta", first.turnId!)).meta).toEqual(meta);
    const later = await turnEventsOfText("meta", "later");
    expect(later.meta).toEqual({ origin: "scheduler" });
  });

  it("refuses metadata outside the whitelist with bad_request", async () => {
    fx = await openHost();
    await fx.host.call(ADMIN, "session.create", { sessionId: "junk" });
    const junk: unknown[] = [{ apiKey: "k" }, { origin: "" }, { voiceDurationMs: -1 }, { hidden: "yes" }];
    for (const meta of junk) {
      const failure = await errorCode(() =>
        fx!.host.call(ADMIN, "session.prompt", {
          sessionId: "junk",
          text: "t",
          clientMessageId: "c",
          meta,
        } as never),
      );
      expect(failure.code).toBe("bad_request");
    }
    expect((await readLog(fx.store, "junk")).map((e) => e.type)).toEqual(["session/created"]);
  });
});

/** The stored user/message whose text is `text`, once its turn ended. */
async function turnEventsOfText(sessionId: string, text: string): Promise<EventDataOf<"user/message">> {
  return vi.waitFor(
    async () => {
      const log = await readLog(fx!.store, sessionId);
      const message = log.find((e) => e.type === "user/message" && e.data.text === text);
      if (message?.type !== "user/message") throw new Error("not yet");
      const turnId = log.filter((e) => e.type === "turn/start" && e.seq < message.seq).at(-1);
      if (turnId?.type !== "turn/start") throw new Error("no turn");
      return storedMessage(sessionId, turnId.data.turnId);
    },
    { timeout: 10_000, interval: 20 },
  );
}
