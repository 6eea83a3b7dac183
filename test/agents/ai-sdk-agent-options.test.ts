import fs from "node:fs";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { simulateReadableStream } from "ai";
import { MockLanguageModelV3 } from "ai/test";
import { afterEach, beforeEach, describe, expect, test, vi } from "vitest";
import type { TurnOutcome } from "../../src/agents/agent.js";
import { defineTool } from "../../src/agents/agent-tool.js";
import { AiSdkAgent, type AiSdkAgentOptions } from "../../src/agents/ai-sdk-agent.js";
import { OpenAIAgent } from "../../src/agents/openai-agent.js";
import { ADMIN } from "../../src/host/principal.js";
import { demoAgentWith, type HostFixture, openHost, readLog, turnEvents } from "../host/host-fixture.js";
import { tempDir } from "../support/temp-dir.js";
import { FakeChatCompletions, type Reply, textReply } from "./fake-chat-completions.js";

let fake: FakeChatCompletions;
let fx: HostFixture | undefined;
const dir = tempDir("sessionmux-ai-sdk-options-");

beforeEach(async () => {
  fake = await FakeChatCompletions.start();
});
afterEach(async () => {
  await fx?.dispose();
  fx = undefined;
  await fake.close();
});

function agent(options: Partial<AiSdkAgentOptions> = {}): AiSdkAgent {
  const provider = createOpenAICompatible({ name: "fake", baseURL: fake.baseURL });
  return new AiSdkAgent({
    models: [
      { id: "small", label: "Small" },
      { id: "large", label: "Large" },
    ],
    languageModel: (id) => provider.chatModel(id),
    ...options,
  });
}

async function prompt(sessionId: string, text: string): Promise<Record<string, unknown>> {
  const r = await fx!.host.call(ADMIN, "session.prompt", { sessionId, text, clientMessageId: text });
  return (await turnEvents(fx!.store, sessionId, r.turnId!)).at(-1)!.data as Record<string, unknown>;
}

describe("an AI SDK agent's options", () => {
  test("its name, default model and models; none is refused", () => {
    const a = agent();
    expect(a.name).toBe("ai-sdk");
    expect(agent({ name: "mine" }).name).toBe("mine");
    expect(a.defaultModel).toBe("small");
    const models = a.models();
    expect(models).toEqual([
      { id: "small", label: "Small" },
      { id: "large", label: "Large" },
    ]);
    models[0]!.label = "changed";
    expect(a.models()[0]!.label).toBe("Small");
    expect(() => agent({ models: [] })).toThrow(new TypeError("an AI SDK agent needs at least one model"));
  });

  test("options of an unknown name or the wrong kind are refused when the agent is built, naming them", () => {
    const languageModel = () => {
      throw new Error("not called");
    };
    const baseURL = "http://127.0.0.1:9/v1";
    const execute = () => "done";
    const cases: [() => unknown, RegExp][] = [
      // "Cannot read properties of undefined (reading 'replace')" before
      [
        () => new OpenAIAgent({ baseUrl: baseURL, model: "m" } as never),
        /^OpenAIAgent: unknown option baseUrl; it takes baseURL, model, /,
      ],
      [
        () => new OpenAIAgent({ model: "m" } as never),
        /^baseURL must be the endpoint's http\(s\) URL, e\.g\. https:\/\/api\.openai\.com\/v1, got undefined$/,
      ],
      [
        () => new OpenAIAgent({ baseURL: "127.0.0.1:9/v1", model: "m" }),
        /^baseURL must be the endpoint's http\(s\) URL/,
      ],
      // built with no default model before, every turn failing at the endpoint
      [
        () => new OpenAIAgent({ baseURL } as never),
        /^model must be the model's id, e\.g\. "gpt-4o-mini", got undefined$/,
      ],
      // "tools is not iterable" before
      [
        () => new OpenAIAgent({ baseURL, model: "m", tools: {} as never }),
        /^tools must be an array of tools \(defineTool\), got \{\}$/,
      ],
      [
        () => new OpenAIAgent({ baseURL, model: "m", tools: [{ name: "x", execute } as never] }),
        /^tools\[0\] must be a tool \{ name, inputSchema, execute \} \(defineTool\)/,
      ],
      // ignored before: the agent ran without its tools
      [() => OpenAIAgent.fromEnv({}, { tool: [] } as never), /^OpenAIAgent: unknown option tool; /],
      [
        () => new OpenAIAgent({ baseURL, model: "m", maxRetries: -1 }),
        /^maxRetries must be a whole number from 0, got -1$/,
      ],
      [
        () => new AiSdkAgent({ models: [{ id: "a", label: "A" }], languagemodel: languageModel } as never),
        /^AiSdkAgent: unknown option languagemodel; /,
      ],
      // a model id of undefined before
      [
        () => new AiSdkAgent({ models: ["a"] as never, languageModel }),
        /^models\[0\] must be \{ id: string, label: string \}, got "a"$/,
      ],
      // "Cannot read properties of undefined (reading '0')" before
      [
        () => new AiSdkAgent({ languageModel } as never),
        /^models must be an array of \{ id, label \}, the first the default, got undefined$/,
      ],
      [
        () => new AiSdkAgent({ models: [{ id: "a", label: "A" }] } as never),
        /^languageModel must be a function from a model id to an AI SDK model/,
      ],
    ];
    for (const [build, message] of cases) {
      expect(build).toThrow(TypeError);
      expect(build).toThrow(message);
    }
    expect(
      () =>
        new OpenAIAgent({
          baseURL,
          model: "m",
          tools: [defineTool({ name: "t", inputSchema: { type: "object" }, execute })],
        }),
    ).not.toThrow();
  });

  test("a turn calls the session's model with the system prompt; one the agent no longer offers falls back to its default", async () => {
    const dbPath = dir.file("models.db");
    fx = await openHost({ dbPath, agent: agent({ system: "Be brief." }) });
    await fx.host.call(ADMIN, "session.create", { sessionId: "s", model: "large" });
    fake.script(textReply("hi"));
    expect(await prompt("s", "first")).toMatchObject({ state: "completed" });
    expect(fake.requests[0]!.body.model).toBe("large");
    expect(fake.requests[0]!.body.messages[0]).toEqual({ role: "system", content: "Be brief." });
    await fx.dispose();

    // the same sessions, served by an agent that offers only "small"
    fx = await openHost({ dbPath, agent: agent({ models: [{ id: "small", label: "Small" }] }) });
    fake.script(textReply("hi again"));
    expect(await prompt("s", "second")).toMatchObject({ state: "completed" });
    expect(fake.requests[1]!.body.model).toBe("small");
    // no system prompt: none is sent
    expect(fake.requests[1]!.body.messages.map((m) => m.role)).toEqual(["user", "assistant", "user"]);
  });

  test("a model call that fails before streaming is retried twice unless told otherwise", async () => {
    // a retryable status that asks for no wait, so the retries follow at once
    const busy: Reply = (res) =>
      res
        .writeHead(429, { "content-type": "application/json", "retry-after-ms": "0" })
        .end('{"error":"busy"}');
    fx = await openHost({ agent: agent() });
    await fx.host.call(ADMIN, "session.create", { sessionId: "retried" });
    fake.script(busy, busy, textReply("third time"));
    expect(await prompt("retried", "go")).toMatchObject({ state: "completed" });
    expect(fake.requests).toHaveLength(3);
    await fx.dispose();

    fx = await openHost({ agent: agent({ maxRetries: 1 }) });
    await fx.host.call(ADMIN, "session.create", { sessionId: "once" });
    fake.script(busy, busy, textReply("not asked"));
    expect(await prompt("once", "go")).toMatchObject({
      state: "failed",
      error: expect.stringMatching(/\(after 2 attempts\)$/),
    });
    expect(fake.requests).toHaveLength(5);
    expect(fake.unanswered).toBe(1);
  });

  test("without a logger a failed turn writes nothing to the process's output", async () => {
    const written: string[] = [];
    const keep = (fd: unknown, data: unknown) => {
      if (fd === 1 || fd === 2) written.push(String(data));
    };
    for (const name of ["write", "writeSync"] as const) {
      const original = fs[name] as (...args: unknown[]) => unknown;
      vi.spyOn(fs, name).mockImplementation(((...args: unknown[]) => {
        keep(args[0], args[1]);
        return original.apply(fs, args);
      }) as never);
    }
    try {
      fx = await openHost({ agent: agent({ maxRetries: 0 }) });
      await fx.host.call(ADMIN, "session.create", { sessionId: "quiet" });
      const boom: Reply = (res) => res.writeHead(500, { "content-type": "application/json" }).end("{}");
      fake.script(boom);
      expect(await prompt("quiet", "go")).toMatchObject({ state: "failed" });
    } finally {
      vi.restoreAllMocks();
    }
    expect(written.filter((w) => w.includes("agent turn failed"))).toEqual([]);
  });
});

describe("an AI SDK agent on a provider that streams parts the OpenAI-compatible one does not", () => {
  const finish = {
    type: "finish",
    finishReason: { unified: "stop", raw: "stop" },
    usage: {
      inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined },
      outputTokens: { total: 1, text: 1, reasoning: undefined },
    },
  } as const;

  test("empty text and reasoning deltas (a signature, metadata) record nothing", async () => {
    const model = new MockLanguageModelV3({
      doStream: async () => ({
        stream: simulateReadableStream({
          chunks: [
            { type: "stream-start", warnings: [] },
            { type: "reasoning-start", id: "r" },
            { type: "reasoning-delta", id: "r", delta: "thinking" },
            { type: "reasoning-delta", id: "r", delta: "", providerMetadata: { p: { signature: "sig" } } },
            { type: "reasoning-end", id: "r" },
            { type: "text-start", id: "t" },
            { type: "text-delta", id: "t", delta: "", providerMetadata: { p: { block: 1 } } },
            { type: "text-delta", id: "t", delta: "hi" },
            { type: "text-end", id: "t" },
            finish,
          ],
        }),
      }),
    });
    fx = await openHost({ agent: agent({ languageModel: () => model }) });
    await fx.host.call(ADMIN, "session.create", { sessionId: "empty" });
    const r = await fx.host.call(ADMIN, "session.prompt", {
      sessionId: "empty",
      text: "go",
      clientMessageId: "go",
    });
    const events = await turnEvents(fx.store, "empty", r.turnId!);
    expect(events.map((e) => [e.type, (e.data as { text?: string }).text])).toEqual([
      ["turn/start", undefined],
      ["user/message", "go"],
      ["reasoning/delta", "thinking"],
      ["assistant/delta", "hi"],
      ["turn/end", undefined],
    ]);
    expect(events.at(-1)!.data).toMatchObject({ state: "completed" });
  });

  test("a turn cancelled while the model streams ends cancelled by the driver's own outcome, not failed", async () => {
    const model = new MockLanguageModelV3({
      doStream: async ({ abortSignal }) => ({
        stream: new ReadableStream({
          start(controller) {
            controller.enqueue({ type: "stream-start", warnings: [] });
            controller.enqueue({ type: "text-start", id: "t" });
            controller.enqueue({ type: "text-delta", id: "t", delta: "Half" });
            abortSignal?.addEventListener("abort", () => controller.error(abortSignal.reason), {
              once: true,
            });
          },
        }),
      }),
    });
    const driver = agent({ languageModel: () => model });
    // what the driver itself returns, before the host ends the turn
    const outcomes: TurnOutcome[] = [];
    fx = await openHost({
      agent: demoAgentWith("outcomes", async (turn) => {
        const outcome = await driver.runTurn(turn);
        outcomes.push(outcome);
        return outcome;
      }),
    });
    await fx.host.call(ADMIN, "session.create", { sessionId: "stopped" });
    const r = await fx.host.call(ADMIN, "session.prompt", {
      sessionId: "stopped",
      text: "go",
      clientMessageId: "go",
    });
    await vi.waitFor(async () => {
      expect((await readLog(fx!.store, "stopped")).some((e) => e.type === "assistant/delta")).toBe(true);
    });
    await fx.host.call(ADMIN, "session.cancel", { sessionId: "stopped" });
    expect((await turnEvents(fx.store, "stopped", r.turnId!)).at(-1)!.data).toMatchObject({
      state: "cancelled",
    });
    await vi.waitFor(() => expect(outcomes).toEqual([{ state: "cancelled" }]));
  });

  test("cancel after a tool call the provider finished mid-stream: the turn ends cancelled and the tool never runs", async () => {
    let executed = 0;
    const model = new MockLanguageModelV3({
      doStream: async ({ abortSignal }) => ({
        stream: new ReadableStream({
          start(controller) {
            controller.enqueue({ type: "stream-start", warnings: [] });
            controller.enqueue({ type: "tool-call", toolCallId: "a", toolName: "ping", input: '{"n":1}' });
            // the step goes on streaming until the turn is cancelled
            abortSignal?.addEventListener("abort", () => controller.error(abortSignal.reason), {
              once: true,
            });
          },
        }),
      }),
    });
    const ping = defineTool({
      name: "ping",
      inputSchema: { type: "object", properties: { n: { type: "number" } } },
      execute: () => ++executed,
    });
    fx = await openHost({ agent: agent({ languageModel: () => model, tools: [ping] }) });
    await fx.host.call(ADMIN, "session.create", { sessionId: "cancel" });
    const r = await fx.host.call(ADMIN, "session.prompt", {
      sessionId: "cancel",
      text: "ping",
      clientMessageId: "ping",
    });
    await vi.waitFor(async () => {
      expect((await readLog(fx!.store, "cancel")).some((e) => e.type === "tool/call")).toBe(true);
    });
    await fx.host.call(ADMIN, "session.cancel", { sessionId: "cancel" });
    const events = await turnEvents(fx.store, "cancel", r.turnId!);
    expect(events.map((e) => e.type)).toEqual(["turn/start", "user/message", "tool/call", "turn/end"]);
    expect(events.at(-1)!.data).toMatchObject({ state: "cancelled" });
    await vi.waitFor(() => expect(fx!.host.live.isRunning("cancel")).toBe(false));
    expect(executed).toBe(0);
  });
});
