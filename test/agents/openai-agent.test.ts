import { once } from "node:events";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, beforeEach, describe, expect, test, vi } from "vitest";
import type { SessionEvent } from "../../protocol/index.js";
import { OpenAIAgent } from "../../src/agents/openai-agent.js";
import { createAgent } from "../../src/agents/registry.js";
import { ADMIN } from "../../src/host/principal.js";
import { assistantText, type HostFixture, openHost, turnEvents } from "../host/host-fixture.js";

/** A real HTTP server on 127.0.0.1 speaking the streaming chat-completions dialect. */
interface FakeEndpoint {
  baseURL: string;
  requests: {
    headers: IncomingMessage["headers"];
    body: { model: string; stream: boolean; messages: unknown[] };
  }[];
  reply: (res: ServerResponse) => void;
  server: Server;
}

function sse(res: ServerResponse, chunks: unknown[]): void {
  res.writeHead(200, { "content-type": "text/event-stream" });
  for (const chunk of chunks) res.write(`data: ${JSON.stringify(chunk)}\n\n`);
  res.end("data: [DONE]\n\n");
}

const delta = (d: object) => ({ choices: [{ index: 0, delta: d }] });

async function startEndpoint(): Promise<FakeEndpoint> {
  const endpoint = { requests: [], reply: (res: ServerResponse) => sse(res, []) } as unknown as FakeEndpoint;
  endpoint.server = createServer(async (req, res) => {
    const parts: Buffer[] = [];
    for await (const part of req) parts.push(part as Buffer);
    if (req.method !== "POST" || req.url !== "/v1/chat/completions") {
      res.writeHead(404).end();
      return;
    }
    endpoint.requests.push({ headers: req.headers, body: JSON.parse(Buffer.concat(parts).toString("utf8")) });
    endpoint.reply(res);
  });
  endpoint.server.listen(0, "127.0.0.1");
  await once(endpoint.server, "listening");
  endpoint.baseURL = `http://127.0.0.1:${(endpoint.server.address() as AddressInfo).port}/v1`;
  return endpoint;
}

let endpoint: FakeEndpoint;
let fx: HostFixture;
const S = "chat";
let n = 0;

beforeEach(async () => {
  endpoint = await startEndpoint();
  fx = await openHost({
    agent: new OpenAIAgent({ baseURL: endpoint.baseURL, model: "fake-model", apiKey: "sk-test" }),
  });
  await fx.host.call(ADMIN, "session.create", { sessionId: S });
});
afterEach(async () => {
  await fx.dispose();
  endpoint.server.closeAllConnections();
  await new Promise<void>((resolve) => endpoint.server.close(() => resolve()));
});

async function run(text: string): Promise<SessionEvent[]> {
  const r = await fx.host.call(ADMIN, "session.prompt", { sessionId: S, text, clientMessageId: `m${++n}` });
  return turnEvents(fx.store, S, r.turnId!);
}

describe("OpenAIAgent", () => {
  test("streamed content becomes assistant deltas; the request carries model, key and the history", async () => {
    endpoint.reply = (res) =>
      sse(res, [delta({ role: "assistant" }), delta({ content: "Hel" }), delta({ content: "lo!" })]);
    const first = await run("hi there");
    expect(
      first
        .filter((e) => e.type === "assistant/delta")
        .map((e) => e.type === "assistant/delta" && e.data.text),
    ).toEqual(["Hel", "lo!"]);
    expect(first.at(-1)).toMatchObject({ type: "turn/end", data: { state: "completed" } });
    await vi.waitFor(() => expect(fx.host.live.isRunning(S)).toBe(false));
    await run("and again");
    const [req1, req2] = endpoint.requests;
    expect(req1!.headers.authorization).toBe("Bearer sk-test");
    expect(req1!.body).toMatchObject({
      model: "fake-model",
      stream: true,
      messages: [{ role: "user", content: "hi there" }],
    });
    expect(req2!.body.messages).toEqual([
      { role: "user", content: "hi there" },
      { role: "assistant", content: "Hello!" },
      { role: "user", content: "and again" },
    ]);
  });

  test("a turn parked by a restart continues from the log with the answer as the next message", async () => {
    endpoint.reply = (res) => sse(res, [delta({ content: "Hello!" })]);
    await run("hi there");
    await vi.waitFor(() => expect(fx.host.live.isRunning(S)).toBe(false));
    // what a host that stopped mid-approval leaves: the turn so far and a pending interaction
    const turnId = "parked-turn";
    await fx.store.append(S, [
      { type: "turn/start", data: { turnId, trigger: "prompt" } },
      {
        type: "user/message",
        data: { messageId: "m-deploy", source: "user", text: "deploy?", attachments: [], meta: {} },
      },
      { type: "assistant/delta", data: { turnId, text: "Let me check." } },
      {
        type: "interaction/requested",
        data: { turnId, interactionId: "i-deploy", kind: "approval", action: "deploy", toolCallId: "call_1" },
      },
    ]);
    await fx.restart();
    endpoint.reply = (res) => sse(res, [delta({ content: "Deployed." })]);
    await fx.host.call(ADMIN, "session.respond", {
      interactionId: "i-deploy",
      response: { outcome: "approve" },
    });
    const events = await turnEvents(fx.store, S, turnId);
    expect(events.at(-1)).toMatchObject({ type: "turn/end", data: { state: "completed" } });
    expect(assistantText(events)).toBe("Let me check.Deployed.");
    expect(endpoint.requests.at(-1)!.body.messages).toEqual([
      { role: "user", content: "hi there" },
      { role: "assistant", content: "Hello!" },
      { role: "user", content: "deploy?" },
      { role: "assistant", content: "Let me check." },
      { role: "user", content: 'Approval of "deploy" (tool call call_1): approved' },
    ]);
  });

  test("reasoning_content becomes reasoning deltas", async () => {
    endpoint.reply = (res) =>
      sse(res, [
        delta({ reasoning_content: "Let me think. " }),
        delta({ reasoning_content: "Done." }),
        delta({ content: "42" }),
      ]);
    const events = await run("meaning?");
    expect(
      events
        .filter((e) => e.type === "reasoning/delta")
        .map((e) => e.type === "reasoning/delta" && e.data.text),
    ).toEqual(["Let me think. ", "Done."]);
    expect(assistantText(events)).toBe("42");
  });

  test("tool calls streamed in pieces are assembled into tool/call events", async () => {
    endpoint.reply = (res) =>
      sse(res, [
        delta({
          tool_calls: [
            { index: 0, id: "call_a", type: "function", function: { name: "get_weather", arguments: "" } },
          ],
        }),
        delta({ tool_calls: [{ index: 0, function: { arguments: '{"city":' } }] }),
        delta({
          tool_calls: [
            { index: 1, id: "call_b", type: "function", function: { name: "get_time", arguments: "{}" } },
          ],
        }),
        delta({ tool_calls: [{ index: 0, function: { arguments: '"Oslo"}' } }] }),
        { choices: [{ index: 0, delta: {}, finish_reason: "tool_calls" }] },
      ]);
    const events = await run("weather?");
    const calls = events.filter((e) => e.type === "tool/call").map((e) => e.data);
    expect(calls).toEqual([
      { turnId: expect.any(String), toolCallId: "call_a", name: "get_weather", args: { city: "Oslo" } },
      { turnId: expect.any(String), toolCallId: "call_b", name: "get_time", args: {} },
    ]);
    expect(events.at(-1)).toMatchObject({ data: { state: "completed" } });
  });

  test("an HTTP 500 fails the turn with an error naming the status", async () => {
    endpoint.reply = (res) =>
      res.writeHead(500, { "content-type": "application/json" }).end('{"error":"boom"}');
    const errors: string[] = [];
    fx.host.subscribeNotifications(ADMIN, (nt) => {
      if (nt.name === "agent.error") errors.push(nt.value.message);
    });
    const events = await run("hello");
    expect(events.at(-1)).toMatchObject({
      type: "turn/end",
      data: { state: "failed", error: expect.stringContaining("HTTP 500") },
    });
    expect(errors).toEqual([expect.stringContaining("boom")]);
  });

  test("cancel aborts the request mid-stream and ends the turn cancelled", async () => {
    endpoint.reply = (res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write(`data: ${JSON.stringify(delta({ content: "partial" }))}\n\n`);
      // the stream stays open until the client goes away
    };
    const r = await fx.host.call(ADMIN, "session.prompt", {
      sessionId: S,
      text: "long",
      clientMessageId: "long",
    });
    await vi.waitFor(async () => {
      const out = await fx.store.readAfter(S, 0, 100);
      expect(out.status === "ok" && out.events.some((e) => e.type === "assistant/delta")).toBe(true);
    });
    await fx.host.call(ADMIN, "session.cancel", { sessionId: S });
    const events = await turnEvents(fx.store, S, r.turnId!);
    expect(events.at(-1)).toMatchObject({ data: { state: "cancelled" } });
  });

  test("fromEnv reads SESSIONMUX_OPENAI_* first, then OPENAI_*; createAgent builds both agents", () => {
    const a = OpenAIAgent.fromEnv({
      SESSIONMUX_OPENAI_MODEL: "m1",
      OPENAI_MODEL: "m2",
      OPENAI_BASE_URL: "http://127.0.0.1:1/v1",
    });
    expect(a.defaultModel).toBe("m1");
    expect(OpenAIAgent.fromEnv({ OPENAI_MODEL: "m2" }).defaultModel).toBe("m2");
    expect(createAgent("demo").name).toBe("demo");
    expect(createAgent("openai").name).toBe("openai");
  });
});
