import { jsonSchema } from "ai";
import { afterEach, beforeEach, describe, expect, test, vi } from "vitest";
import { z } from "zod";
import type { SessionEvent } from "../../protocol/index.js";
import { defineTool } from "../../src/agents/agent-tool.js";
import { OpenAIAgent } from "../../src/agents/openai-agent.js";
import { ADMIN } from "../../src/host/principal.js";
import { type HostFixture, openHost, readLog, turnEvents } from "../host/host-fixture.js";
import { capturedLogger } from "../support/log-capture.js";
import { chunk, FakeChatCompletions, streamed, textReply, toolCallReply } from "./fake-chat-completions.js";

const S = "tools";
let fake: FakeChatCompletions;
let fx: HostFixture;

/** A turn's events in a form that shows their order and what each says. */
function shape(events: SessionEvent[]): unknown[] {
  return events.map((e) => {
    const { turnId: _t, ...data } = e.data as Record<string, unknown>;
    if (e.type === "tool/result") {
      const { durationMs, ...rest } = data;
      expect(durationMs).toBeGreaterThanOrEqual(0);
      return [e.type, rest];
    }
    if (e.type === "user/message") return [e.type, { text: data.text, interjection: data.interjection }];
    if (e.type === "interaction/requested")
      return [e.type, { ...data, interactionId: typeof data.interactionId }];
    if (e.type === "interaction/resolved") return [e.type, { resolution: data.resolution }];
    return [e.type, data];
  });
}

const hasResult = (log: SessionEvent[], toolCallId: string) =>
  log.some((e) => e.type === "tool/result" && e.data.toolCallId === toolCallId);

function tools() {
  return [
    defineTool({
      name: "weather",
      description: "Current weather of a city",
      inputSchema: z.object({ city: z.string() }),
      execute: ({ city }) => ({ city, tempC: 21 }),
    }),
    defineTool({
      name: "deploy",
      description: "Deploys the app",
      inputSchema: jsonSchema<{ target: string }>({
        type: "object",
        properties: { target: { type: "string" } },
        required: ["target"],
      }),
      needsApproval: true,
      // finishes after the weather call, so the two parallel results have one order in the log
      execute: async ({ target }) => {
        await vi.waitFor(async () => expect(hasResult(await readLog(fx.store, S), "call_w")).toBe(true), {
          timeout: 15_000,
          interval: 10,
        });
        return { deployed: target };
      },
    }),
    defineTool({
      name: "explode",
      description: "Always fails",
      inputSchema: { type: "object", properties: {} },
      execute: () => {
        throw new Error("disk on fire");
      },
    }),
  ];
}

beforeEach(async () => {
  fake = await FakeChatCompletions.start();
});
afterEach(async () => {
  await fx.dispose();
  await fake.close();
});

describe("the AI SDK agent's tool loop, through a real host", () => {
  test("parallel calls, an approval answered by session.respond, a failing call and an interjection", async () => {
    const { logger, lines } = capturedLogger();
    fx = await openHost({
      agent: new OpenAIAgent({
        baseURL: fake.baseURL,
        model: "fake-model",
        apiKey: "sk-test",
        tools: tools(),
        logger,
      }),
    });
    await fx.host.call(ADMIN, "session.create", { sessionId: S });
    fake.script(
      toolCallReply("Checking. ", [
        { id: "call_w", name: "weather", args: { city: "Oslo" } },
        { id: "call_d", name: "deploy", args: { target: "prod" } },
      ]),
      toolCallReply("", [{ id: "call_x", name: "explode", args: {} }]),
      textReply("Done: ", "Oslo is 21°C."),
    );
    const started = await fx.host.call(ADMIN, "session.prompt", {
      sessionId: S,
      text: "weather, then deploy",
      clientMessageId: "p1",
    });
    // the turn waits on the operator: steer a prompt into it, then approve
    const interactionId = await vi.waitFor(
      async () => {
        const asked = (await readLog(fx.store, S)).find((e) => e.type === "interaction/requested");
        expect(asked).toBeDefined();
        return asked!.type === "interaction/requested" ? asked!.data.interactionId : "";
      },
      { timeout: 15_000, interval: 10 },
    );
    expect(fx.host.live.interactions().map((i) => i.interactionId)).toEqual([interactionId]);
    const queued = await fx.host.call(ADMIN, "session.prompt", {
      sessionId: S,
      text: "also check Bergen",
      clientMessageId: "p2",
    });
    await fx.host.call(ADMIN, "session.updateQueue", {
      sessionId: S,
      op: { steer: true, itemId: queued.itemId! },
    });
    await fx.host.call(ADMIN, "session.respond", { interactionId, response: { outcome: "approve" } });

    const events = await turnEvents(fx.store, S, started.turnId!);
    expect(shape(events)).toEqual([
      ["turn/start", { trigger: "prompt" }],
      ["user/message", { text: "weather, then deploy", interjection: undefined }],
      ["assistant/delta", { text: "Checking. " }],
      ["tool/call", { toolCallId: "call_w", name: "weather", args: { city: "Oslo" } }],
      ["tool/call", { toolCallId: "call_d", name: "deploy", args: { target: "prod" } }],
      [
        "interaction/requested",
        {
          kind: "approval",
          action: 'deploy {"target":"prod"}',
          toolCallId: "call_d",
          interactionId: "string",
        },
      ],
      ["interaction/resolved", { resolution: { outcome: "approve" } }],
      ["tool/result", { toolCallId: "call_w", ok: true, result: { city: "Oslo", tempC: 21 } }],
      ["tool/result", { toolCallId: "call_d", ok: true, result: { deployed: "prod" } }],
      ["user/message", { text: "also check Bergen", interjection: true }],
      ["tool/call", { toolCallId: "call_x", name: "explode", args: {} }],
      ["tool/result", { toolCallId: "call_x", ok: false, result: { error: "disk on fire" } }],
      ["assistant/delta", { text: "Done: " }],
      ["assistant/delta", { text: "Oslo is 21°C." }],
      ["turn/end", { state: "completed" }],
    ]);

    // what the model read at each step: the tools, then every call's result and the interjection
    expect(fake.requests).toHaveLength(3);
    const [first, second, third] = fake.requests.map((r) => r.body);
    expect(first!.model).toBe("fake-model");
    expect(fake.requests[0]!.headers.authorization).toBe("Bearer sk-test");
    expect(first!.tools?.map((t) => t.function.name)).toEqual(["weather", "deploy", "explode"]);
    expect(first!.messages).toEqual([{ role: "user", content: "weather, then deploy" }]);
    expect(second!.messages.slice(1)).toEqual([
      {
        role: "assistant",
        content: "Checking. ",
        tool_calls: [
          { id: "call_w", type: "function", function: { name: "weather", arguments: '{"city":"Oslo"}' } },
          { id: "call_d", type: "function", function: { name: "deploy", arguments: '{"target":"prod"}' } },
        ],
      },
      { role: "tool", tool_call_id: "call_w", content: '{"city":"Oslo","tempC":21}' },
      { role: "tool", tool_call_id: "call_d", content: '{"deployed":"prod"}' },
      { role: "user", content: "also check Bergen" },
    ]);
    expect(third!.messages.at(-1)).toEqual({ role: "tool", tool_call_id: "call_x", content: "disk on fire" });
    // steered, not queued: nothing else runs after the turn
    expect(fx.host.live.queue(S)).toEqual([]);
    expect(lines.filter((l) => l.msg === "agent turn failed")).toEqual([]);
  });

  test("a prompt steered while the model's last answer streams is answered in the same turn", async () => {
    fx = await openHost({ agent: new OpenAIAgent({ baseURL: fake.baseURL, model: "fake-model" }) });
    await fx.host.call(ADMIN, "session.create", { sessionId: S });
    let finish!: () => void;
    const steered = new Promise<void>((resolve) => {
      finish = resolve;
    });
    fake.script(async (res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write(`data: ${JSON.stringify(chunk({ role: "assistant", content: "Hello" }))}\n\n`);
      // the answer ends only once the test has steered a prompt into the turn
      await steered;
      res.write(`data: ${JSON.stringify(chunk({}, "stop"))}\n\n`);
      res.end("data: [DONE]\n\n");
    }, textReply("And Bergen too."));
    const started = await fx.host.call(ADMIN, "session.prompt", {
      sessionId: S,
      text: "hi",
      clientMessageId: "a",
    });
    await vi.waitFor(async () =>
      expect((await readLog(fx.store, S)).some((e) => e.type === "assistant/delta")).toBe(true),
    );
    const queued = await fx.host.call(ADMIN, "session.prompt", {
      sessionId: S,
      text: "Bergen?",
      clientMessageId: "b",
    });
    await fx.host.call(ADMIN, "session.updateQueue", {
      sessionId: S,
      op: { steer: true, itemId: queued.itemId! },
    });
    finish();
    const events = await turnEvents(fx.store, S, started.turnId!);
    expect(shape(events)).toEqual([
      ["turn/start", { trigger: "prompt" }],
      ["user/message", { text: "hi", interjection: undefined }],
      ["assistant/delta", { text: "Hello" }],
      ["user/message", { text: "Bergen?", interjection: true }],
      ["assistant/delta", { text: "And Bergen too." }],
      ["turn/end", { state: "completed" }],
    ]);
    expect(fake.requests[1]!.body.messages).toEqual([
      { role: "user", content: "hi" },
      { role: "assistant", content: "Hello" },
      { role: "user", content: "Bergen?" },
    ]);
    expect((await readLog(fx.store, S)).filter((e) => e.type === "turn/start")).toHaveLength(1);
  });

  test("each step is its own assistant message and its results their own: calls right after results, text in pieces", async () => {
    fx = await openHost({
      agent: new OpenAIAgent({ baseURL: fake.baseURL, model: "fake-model", tools: tools() }),
    });
    await fx.host.call(ADMIN, "session.create", { sessionId: S });
    const weather = (id: string, city: string) => ({
      id,
      type: "function",
      function: { name: "weather", arguments: JSON.stringify({ city }) },
    });
    fake.script(
      toolCallReply("", [{ id: "w1", name: "weather", args: { city: "Oslo" } }]),
      toolCallReply("", [{ id: "w2", name: "weather", args: { city: "Bergen" } }]),
      streamed([
        chunk({ role: "assistant", content: "Almost " }),
        chunk({ content: "there. " }),
        chunk({ tool_calls: [{ index: 0, ...weather("w3", "Tromsø") }] }),
        chunk({}, "tool_calls"),
      ]),
      textReply("Done."),
    );
    const r = await fx.host.call(ADMIN, "session.prompt", {
      sessionId: S,
      text: "three cities",
      clientMessageId: "p",
    });
    expect((await turnEvents(fx.store, S, r.turnId!)).at(-1)!.data).toMatchObject({ state: "completed" });
    expect(fake.requests).toHaveLength(4);
    const result = (id: string, city: string) => ({
      role: "tool",
      tool_call_id: id,
      content: JSON.stringify({ city, tempC: 21 }),
    });
    expect(fake.requests[3]!.body.messages).toEqual([
      { role: "user", content: "three cities" },
      { role: "assistant", content: null, tool_calls: [weather("w1", "Oslo")] },
      result("w1", "Oslo"),
      { role: "assistant", content: null, tool_calls: [weather("w2", "Bergen")] },
      result("w2", "Bergen"),
      { role: "assistant", content: "Almost there. ", tool_calls: [weather("w3", "Tromsø")] },
      result("w3", "Tromsø"),
    ]);
  });
});
