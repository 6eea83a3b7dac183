import type { ServerResponse } from "node:http";
import { afterEach, describe, expect, test } from "vitest";
import type { SessionEvent } from "../../protocol/index.js";
import { OpenAIAgent } from "../../src/agents/openai-agent.js";
import { ADMIN } from "../../src/host/principal.js";
import { type HostFixture, openHost, readLog, turnEvents } from "../host/host-fixture.js";
import { chunk, FakeChatCompletions, type Reply, textReply } from "./fake-chat-completions.js";

const S = "stall";
// long enough that a loaded machine never takes a part's ordinary delay for a stall
const IDLE_MS = 1_500;
let fake: FakeChatCompletions;
let fx: HostFixture;

async function host(modelIdleMs = IDLE_MS): Promise<void> {
  fake = await FakeChatCompletions.start();
  fx = await openHost({
    agent: new OpenAIAgent({ baseURL: fake.baseURL, model: "m", limits: { modelIdleMs } }),
  });
  await fx.host.call(ADMIN, "session.create", { sessionId: S });
}

async function turn(text: string): Promise<SessionEvent[]> {
  const r = await fx.host.call(ADMIN, "session.prompt", { sessionId: S, text, clientMessageId: text });
  return turnEvents(fx.store, S, r.turnId!);
}

const send = (res: ServerResponse, delta: object) => res.write(`data: ${JSON.stringify(chunk(delta))}\n\n`);

/** Streams `pieces` one every `gapMs`, then ends normally. */
const slowReply =
  (gapMs: number, ...pieces: string[]): Reply =>
  async (res) => {
    res.writeHead(200, { "content-type": "text/event-stream" });
    send(res, { role: "assistant", content: "" });
    for (const content of pieces) {
      await new Promise((resolve) => setTimeout(resolve, gapMs));
      send(res, { content });
    }
    send(res, {});
    res.write(`data: ${JSON.stringify(chunk({}, "stop"))}\n\n`);
    res.end("data: [DONE]\n\n");
  };

const stalled = { state: "failed", error: `model_stalled: the model sent nothing for ${IDLE_MS} ms` };

afterEach(async () => {
  await fx.dispose();
  await fake.close();
});

describe("a model that goes quiet does not hold its turn", () => {
  test("quiet mid-answer: the turn fails model_stalled with what it streamed kept, and the session takes the next prompt", async () => {
    await host();
    fake.script((res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      send(res, { role: "assistant", content: "" });
      send(res, { content: "partial " });
      // and nothing more, the connection left open
    }, textReply("second answer"));
    const events = await turn("first");
    expect(events.map((e) => e.type)).toEqual(["turn/start", "user/message", "assistant/delta", "turn/end"]);
    expect(events[2]!.data).toMatchObject({ text: "partial " });
    expect(events.at(-1)!.data).toMatchObject(stalled);
    const next = await turn("second");
    expect(next.at(-1)!.data).toMatchObject({ state: "completed" });
    expect(fake.requests).toHaveLength(2);
  });

  test("quiet before answering at all: the turn fails model_stalled, the call not tried again", async () => {
    await host();
    fake.script(() => {
      // the request is read and never answered, not even with headers
    });
    const events = await turn("first");
    expect(events.map((e) => e.type)).toEqual(["turn/start", "user/message", "turn/end"]);
    expect(events.at(-1)!.data).toMatchObject(stalled);
    expect(fake.requests).toHaveLength(1);
  });

  test("a slow but steady stream is not stalled: the wait starts again at each part", async () => {
    await host();
    // three gaps of 60% of the bound: together well past it, each one within it
    fake.script(slowReply(IDLE_MS * 0.6, "a", "b", "c"));
    const events = await turn("first");
    expect(events.at(-1)!.data).toMatchObject({ state: "completed" });
    expect(
      events
        .filter((e) => e.type === "assistant/delta")
        .map((e) => (e.data as { text: string }).text)
        .join(""),
    ).toBe("abc");
  });

  test("modelIdleMs: Infinity takes the bound away; it does not fire at once", async () => {
    await host(Number.POSITIVE_INFINITY);
    fake.script(slowReply(100, "x", "y"));
    const events = await turn("first");
    expect(events.at(-1)!.data).toMatchObject({ state: "completed" });
  });

  test("a cancel while the model is quiet ends the turn cancelled, not stalled", async () => {
    // a bound the test never reaches: the cancel, not the bound, ends the wait
    await host(60_000);
    fake.script((res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      send(res, { role: "assistant", content: "" });
      send(res, { content: "thinking " });
    });
    const r = await fx.host.call(ADMIN, "session.prompt", {
      sessionId: S,
      text: "go",
      clientMessageId: "go",
    });
    await expect
      .poll(async () => (await readLog(fx.store, S)).some((e) => e.type === "assistant/delta"))
      .toBe(true);
    await fx.host.call(ADMIN, "session.cancel", { sessionId: S });
    const events = await turnEvents(fx.store, S, r.turnId!);
    expect(events.at(-1)!.data).toMatchObject({ state: "cancelled" });
  });
});
