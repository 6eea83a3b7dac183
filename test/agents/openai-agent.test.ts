import { afterEach, beforeEach, describe, expect, test, vi } from "vitest";
import type { SessionEvent } from "../../protocol/index.js";
import { OpenAIAgent, type OpenAIAgentOptions } from "../../src/agents/openai-agent.js";
import { AGENT_NAMES, createAgent } from "../../src/agents/registry.js";
import { ADMIN } from "../../src/host/principal.js";
import { StartupError } from "../../src/operations/startup-error.js";
import { type HostFixture, openHost, readLog, turnEvents } from "../host/host-fixture.js";
import { capturedLogger } from "../support/log-capture.js";
import { chunk, FakeChatCompletions, type Reply, streamed, textReply } from "./fake-chat-completions.js";

const S = "chat";
let fake: FakeChatCompletions;
let fx: HostFixture;
let log: ReturnType<typeof capturedLogger>;
let n = 0;

async function host(options: Partial<OpenAIAgentOptions> = {}): Promise<void> {
  log = capturedLogger();
  fx = await openHost({
    agent: new OpenAIAgent({
      baseURL: fake.baseURL,
      model: "fake-model",
      apiKey: "sk-test",
      logger: log.logger,
      ...options,
    }),
  });
  await fx.host.call(ADMIN, "session.create", { sessionId: S });
}

async function run(text: string): Promise<SessionEvent[]> {
  const r = await fx.host.call(ADMIN, "session.prompt", { sessionId: S, text, clientMessageId: `m${++n}` });
  const events = await turnEvents(fx.store, S, r.turnId!);
  await vi.waitFor(() => expect(fx.host.live.isRunning(S)).toBe(false));
  return events;
}

/** Type and data of each event, without the fields every event of a turn shares. */
const shape = (events: SessionEvent[]) =>
  events.map((e) => {
    const {
      turnId: _t,
      messageId: _m,
      attachments: _a,
      meta: _x,
      source: _s,
      ...data
    } = e.data as Record<string, unknown>;
    return [e.type, data];
  });

const failures = () => log.lines.filter((l) => l.msg === "agent turn failed");

beforeEach(async () => {
  fake = await FakeChatCompletions.start();
});
afterEach(async () => {
  await fx.dispose();
  await fake.close();
});

describe("OpenAIAgent on the AI SDK", () => {
  test("streamed text becomes deltas in order; the next request carries the history", async () => {
    await host();
    fake.script(textReply("Hel", "lo", "!"), textReply("Again."));
    expect(shape(await run("hi there"))).toEqual([
      ["turn/start", { trigger: "prompt" }],
      ["user/message", { text: "hi there" }],
      ["assistant/delta", { text: "Hel" }],
      ["assistant/delta", { text: "lo" }],
      ["assistant/delta", { text: "!" }],
      ["turn/end", { state: "completed" }],
    ]);
    await run("and again");
    const [req1, req2] = fake.requests;
    expect(req1!.headers.authorization).toBe("Bearer sk-test");
    expect(req1!.body).toMatchObject({
      model: "fake-model",
      stream: true,
      messages: [{ role: "user", content: "hi there" }],
    });
    // no tools declared: none are sent
    expect(req1!.body.tools).toBeUndefined();
    expect(req2!.body.messages).toEqual([
      { role: "user", content: "hi there" },
      { role: "assistant", content: "Hello!" },
      { role: "user", content: "and again" },
    ]);
    expect(failures()).toEqual([]);
  });

  test("trailing slashes on baseURL, however many, are dropped: requests go to {baseURL}/chat/completions", async () => {
    // the fake answers only POST /v1/chat/completions; any other path is a 404 that fails the turn
    await host({ baseURL: `${fake.baseURL}///` });
    fake.script(textReply("ok"));
    expect(shape(await run("hi")).at(-1)).toEqual(["turn/end", { state: "completed" }]);
    expect(fake.requests).toHaveLength(1);
    expect(failures()).toEqual([]);
  });

  test("reasoning_content becomes reasoning deltas before the answer", async () => {
    await host();
    fake.script(
      streamed([
        chunk({ role: "assistant", reasoning_content: "Let me think. " }),
        chunk({ reasoning_content: "Done." }),
        chunk({ content: "42" }),
        chunk({}, "stop"),
      ]),
    );
    expect(shape(await run("meaning?")).slice(2)).toEqual([
      ["reasoning/delta", { text: "Let me think. " }],
      ["reasoning/delta", { text: "Done." }],
      ["assistant/delta", { text: "42" }],
      ["turn/end", { state: "completed" }],
    ]);
  });

  test("an HTTP 500, retried, fails the turn with the status and body, notified and logged", async () => {
    await host({ maxRetries: 1 });
    const boom: Reply = (res) =>
      res.writeHead(500, { "content-type": "application/json" }).end('{"error":"boom"}');
    fake.script(boom, boom);
    const notified: string[] = [];
    fx.host.subscribeNotifications(ADMIN, (nt) => {
      if (nt.name === "agent.error") notified.push(nt.value.message);
    });
    const events = await run("hello");
    const error = `model call failed: HTTP 500 from ${fake.baseURL}/chat/completions: {"error":"boom"} (after 2 attempts)`;
    expect(shape(events)).toEqual([
      ["turn/start", { trigger: "prompt" }],
      ["user/message", { text: "hello" }],
      ["turn/end", { state: "failed", error }],
    ]);
    expect(fake.requests).toHaveLength(2);
    await vi.waitFor(() => expect(notified).toEqual([error]));
    expect(failures()).toEqual([
      expect.objectContaining({ level: 40, sessionId: S, agent: "openai", error, err: expect.any(Object) }),
    ]);
  });

  test("a stream broken mid-answer fails the turn with the socket's cause; the text so far stays", async () => {
    await host();
    fake.script((res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write(`data: ${JSON.stringify(chunk({ role: "assistant", content: "Half an" }))}\n\n`);
      // flushed, then the connection dies without an end
      setImmediate(() => res.socket?.destroy());
    });
    const events = await run("tell me");
    expect(shape(events).slice(0, 3)).toEqual([
      ["turn/start", { trigger: "prompt" }],
      ["user/message", { text: "tell me" }],
      ["assistant/delta", { text: "Half an" }],
    ]);
    const end = events.at(-1)!;
    expect(end.type).toBe("turn/end");
    expect(end.data).toMatchObject({
      state: "failed",
      error: expect.stringMatching(/^model call failed: .+/),
    });
    // the root cause is named, not just "failed"
    const error = (end.data as { error: string }).error;
    expect(error.startsWith(`model call failed: ${fake.baseURL}/chat/completions: `)).toBe(true);
    expect(error).toMatch(/terminated: other side closed$/);
    expect(events).toHaveLength(4);
    expect(failures()).toHaveLength(1);
  });

  test("a chunk that is not JSON fails the turn naming the parse error", async () => {
    await host();
    fake.script((res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.end("data: {not json\n\ndata: [DONE]\n\n");
    });
    const end = (await run("x")).at(-1)!;
    expect(end.data).toMatchObject({ state: "failed", error: expect.stringMatching(/JSON/i) });
    expect(failures()).toHaveLength(1);
  });

  test("cancel aborts the request mid-stream and ends the turn cancelled, logging no failure", async () => {
    await host();
    fake.script((res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write(`data: ${JSON.stringify(chunk({ role: "assistant", content: "partial" }))}\n\n`);
      // the stream stays open until the client goes away
    });
    const r = await fx.host.call(ADMIN, "session.prompt", {
      sessionId: S,
      text: "long",
      clientMessageId: "long",
    });
    await vi.waitFor(async () => {
      expect((await readLog(fx.store, S)).some((e) => e.type === "assistant/delta")).toBe(true);
    });
    await fx.host.call(ADMIN, "session.cancel", { sessionId: S });
    const events = await turnEvents(fx.store, S, r.turnId!);
    expect(events.at(-1)).toMatchObject({ data: { state: "cancelled" } });
    expect(failures()).toEqual([]);
  });

  test("fromEnv reads SESSIONMUX_OPENAI_* first, then OPENAI_*; createAgent builds both agents", () => {
    fx = { dispose: async () => {} } as HostFixture;
    const a = OpenAIAgent.fromEnv({
      SESSIONMUX_OPENAI_MODEL: "m1",
      OPENAI_MODEL: "m2",
      OPENAI_BASE_URL: "http://127.0.0.1:1/v1",
    });
    expect(a.defaultModel).toBe("m1");
    expect(a.models()).toEqual([{ id: "m1", label: "m1" }]);
    expect(OpenAIAgent.fromEnv({ OPENAI_MODEL: "m2", OPENAI_API_KEY: "sk" }).defaultModel).toBe("m2");
    expect(OpenAIAgent.fromEnv({ OPENAI_API_KEY: "sk" }).defaultModel).toBe("gpt-4o-mini");
    // OpenAI's own endpoint with no key would fail every turn with its 401: refused when built
    for (const env of [{}, { OPENAI_API_KEY: "" }, { OPENAI_BASE_URL: "https://api.openai.com/v1/" }]) {
      expect(() => OpenAIAgent.fromEnv(env), JSON.stringify(env)).toThrow(
        new TypeError(
          `apiKey is needed by ${env.OPENAI_BASE_URL ?? "https://api.openai.com/v1"} (fromEnv reads SESSIONMUX_OPENAI_API_KEY or OPENAI_API_KEY); an endpoint that takes no key needs its own baseURL`,
        ),
      );
    }
    expect(() => new OpenAIAgent({ baseURL: "https://api.openai.com/v1", model: "m" })).toThrow(TypeError);
    expect(OpenAIAgent.fromEnv({ OPENAI_BASE_URL: "http://127.0.0.1:11434/v1" }).defaultModel).toBe(
      "gpt-4o-mini",
    );
    expect(createAgent("demo", {}).name).toBe("demo");
    expect(createAgent("openai", { OPENAI_API_KEY: "sk" }).name).toBe("openai");
  });

  test("createAgent refuses OpenAI's own endpoint without a key, and takes any other endpoint without one", () => {
    fx = { dispose: async () => {} } as HostFixture;
    for (const env of [
      {},
      { OPENAI_BASE_URL: "https://api.openai.com/v1/" },
      { SESSIONMUX_OPENAI_API_KEY: "" },
    ]) {
      let refused: unknown;
      try {
        createAgent("openai", env);
      } catch (err) {
        refused = err;
      }
      expect(refused, JSON.stringify(env)).toBeInstanceOf(StartupError);
      expect((refused as StartupError).code).toBe("agent_unconfigured");
      expect((refused as StartupError).message).toContain(
        "set SESSIONMUX_OPENAI_API_KEY (or OPENAI_API_KEY)",
      );
    }
    expect(createAgent("openai", { SESSIONMUX_OPENAI_API_KEY: "sk" }).name).toBe("openai");
    // a variable set empty is unset: the next one in line, or the default, is taken
    expect(
      OpenAIAgent.endpointFromEnv({
        SESSIONMUX_OPENAI_BASE_URL: "",
        OPENAI_BASE_URL: "http://127.0.0.1:1/v1",
        SESSIONMUX_OPENAI_MODEL: "",
        SESSIONMUX_OPENAI_API_KEY: "",
      }),
    ).toEqual({ baseURL: "http://127.0.0.1:1/v1", model: "gpt-4o-mini" });
    expect(createAgent("openai", { SESSIONMUX_OPENAI_BASE_URL: "http://127.0.0.1:11434/v1" }).name).toBe(
      "openai",
    );
    // a base URL that is no http(s) URL is refused at the start, not at every turn's first call
    expect(() => createAgent("openai", { SESSIONMUX_OPENAI_BASE_URL: "not a url" })).toThrow(
      expect.objectContaining({
        name: "StartupError",
        code: "agent_unconfigured",
        message:
          '--agent openai: baseURL must be the endpoint\'s http(s) URL, e.g. https://api.openai.com/v1, got "not a url" (set SESSIONMUX_OPENAI_BASE_URL or OPENAI_BASE_URL)',
      }),
    );
  });

  test("the CLI's agent names are every agent createAgent builds, each under its own name", () => {
    fx = { dispose: async () => {} } as HostFixture;
    expect(AGENT_NAMES.map((name) => createAgent(name, { OPENAI_API_KEY: "sk" }).name)).toEqual([
      "demo",
      "openai",
    ]);
  });
});
