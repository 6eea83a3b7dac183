import { afterEach, describe, expect, test } from "vitest";
import type { SessionEvent } from "../../protocol/index.js";
import { AgentLimitError, type AgentLimits } from "../../src/agents/agent-limits.js";
import { defineTool } from "../../src/agents/agent-tool.js";
import { OpenAIAgent } from "../../src/agents/openai-agent.js";
import { ADMIN } from "../../src/host/principal.js";
import { type HostFixture, openHost, turnEvents } from "../host/host-fixture.js";
import { capturedLogger } from "../support/log-capture.js";
import { FakeChatCompletions, textReply, toolCallReply } from "./fake-chat-completions.js";

const S = "limits";
let fake: FakeChatCompletions;
let fx: HostFixture;
let executed = 0;

async function turnWith(limits: Partial<AgentLimits>, script: () => void): Promise<SessionEvent[]> {
  executed = 0;
  fake = await FakeChatCompletions.start();
  const log = capturedLogger();
  const ping = defineTool({
    name: "ping",
    inputSchema: { type: "object", properties: { n: { type: "number" } } },
    execute: () => ++executed,
  });
  fx = await openHost({
    agent: new OpenAIAgent({ baseURL: fake.baseURL, model: "m", tools: [ping], limits, logger: log.logger }),
  });
  await fx.host.call(ADMIN, "session.create", { sessionId: S });
  script();
  const r = await fx.host.call(ADMIN, "session.prompt", { sessionId: S, text: "go", clientMessageId: "go" });
  const events = await turnEvents(fx.store, S, r.turnId!);
  // a failed turn is logged with its error, a completed one not at all
  const error = (events.at(-1)!.data as { error?: string }).error;
  expect(log.lines.filter((l) => l.msg === "agent turn failed").map((l) => l.error)).toEqual(
    error === undefined ? [] : [error],
  );
  return events;
}

const types = (events: SessionEvent[]) => events.map((e) => e.type);

afterEach(async () => {
  await fx.dispose();
  await fake.close();
});

describe("what a model can make the host hold is bounded", () => {
  test("more tool calls in one step than allowed: the turn fails before any of them runs", async () => {
    const events = await turnWith({ maxToolCallsPerStep: 2 }, () =>
      fake.script(
        toolCallReply("", [
          { id: "a", name: "ping", args: { n: 1 } },
          { id: "b", name: "ping", args: { n: 2 } },
          { id: "c", name: "ping", args: { n: 3 } },
        ]),
      ),
    );
    expect(events.at(-1)!.data).toMatchObject({
      state: "failed",
      error: "too_many_tool_calls: the model asked for more than 2 tool calls in one step",
    });
    // counted as each call starts streaming: the third fails the step before any call is recorded
    expect(types(events)).toEqual(["turn/start", "user/message", "turn/end"]);
    expect(executed).toBe(0);
  });

  test("as many tool calls in one step as allowed run", async () => {
    const events = await turnWith({ maxToolCallsPerStep: 2 }, () =>
      fake.script(
        toolCallReply("", [
          { id: "a", name: "ping", args: { n: 1 } },
          { id: "b", name: "ping", args: { n: 2 } },
        ]),
        textReply("done"),
      ),
    );
    expect(events.at(-1)!.data).toMatchObject({ state: "completed" });
    expect(executed).toBe(2);
  });

  test("a model that keeps calling tools fails the turn after the step limit", async () => {
    const events = await turnWith({ maxStepsPerTurn: 2 }, () =>
      fake.script(
        toolCallReply("", [{ id: "a", name: "ping", args: { n: 1 } }]),
        toolCallReply("", [{ id: "b", name: "ping", args: { n: 2 } }]),
        toolCallReply("", [{ id: "c", name: "ping", args: { n: 3 } }]),
      ),
    );
    expect(types(events)).toEqual([
      "turn/start",
      "user/message",
      "tool/call",
      "tool/result",
      "tool/call",
      "tool/result",
      "turn/end",
    ]);
    expect(events.at(-1)!.data).toMatchObject({
      state: "failed",
      error: "too_many_steps: the model needed more than 2 steps in one turn",
    });
    expect(fake.requests).toHaveLength(2);
    expect(fake.unanswered).toBe(1);
  });

  test("a step streaming more text than allowed stops at the limit", async () => {
    const events = await turnWith({ maxStepChars: 10 }, () =>
      fake.script(textReply("01234567", "89abc", "def")),
    );
    expect(events.map((e) => [e.type, (e.data as { text?: string }).text])).toEqual([
      ["turn/start", undefined],
      ["user/message", "go"],
      ["assistant/delta", "01234567"],
      ["turn/end", undefined],
    ]);
    expect(events.at(-1)!.data).toMatchObject({
      state: "failed",
      error: "step_too_long: the model streamed more than 10 characters in one step",
    });
  });

  test("a step streaming exactly as much text as allowed completes", async () => {
    const events = await turnWith({ maxStepChars: 10 }, () => fake.script(textReply("01234567", "89")));
    expect(events.map((e) => [e.type, (e.data as { text?: string }).text])).toEqual([
      ["turn/start", undefined],
      ["user/message", "go"],
      ["assistant/delta", "01234567"],
      ["assistant/delta", "89"],
      ["turn/end", undefined],
    ]);
    expect(events.at(-1)!.data).toMatchObject({ state: "completed" });
  });

  test("a tool call's streamed arguments count toward the step's characters", async () => {
    // {"n":123456789} is 15 characters, streamed in two pieces
    const events = await turnWith({ maxStepChars: 10 }, () =>
      fake.script(toolCallReply("", [{ id: "a", name: "ping", args: { n: 123456789 } }]), textReply("done")),
    );
    expect(events.at(-1)!.data).toMatchObject({
      state: "failed",
      error: "step_too_long: the model streamed more than 10 characters in one step",
    });
    expect(types(events)).toEqual(["turn/start", "user/message", "turn/end"]);
    expect(executed).toBe(0);
  });
});

describe("the limits an agent gets when it is given none", () => {
  test("sixteen tool calls in one step run; a seventeenth fails the step", async () => {
    const calls = (n: number) =>
      Array.from({ length: n }, (_, i) => ({ id: `c${i}`, name: "ping", args: { n: i } }));
    let events = await turnWith({}, () => fake.script(toolCallReply("", calls(16)), textReply("done")));
    expect(events.at(-1)!.data).toMatchObject({ state: "completed" });
    expect(executed).toBe(16);
    await fx.dispose();
    await fake.close();

    events = await turnWith({}, () => fake.script(toolCallReply("", calls(17))));
    expect(events.at(-1)!.data).toMatchObject({
      state: "failed",
      error: "too_many_tool_calls: the model asked for more than 16 tool calls in one step",
    });
    expect(executed).toBe(0);
  });

  test("a model that keeps calling tools fails the turn after sixteen steps", async () => {
    const step = (i: number) => toolCallReply("", [{ id: `s${i}`, name: "ping", args: { n: i } }]);
    const events = await turnWith({}, () => fake.script(...Array.from({ length: 17 }, (_, i) => step(i))));
    expect(events.at(-1)!.data).toMatchObject({
      state: "failed",
      error: "too_many_steps: the model needed more than 16 steps in one turn",
    });
    expect(fake.requests).toHaveLength(16);
    expect(executed).toBe(16);
  });
});

describe("a limit's error", () => {
  test("is an Error named for its kind, with its code and bound, its message led by the code", () => {
    const err = new AgentLimitError("step_too_long", 10, "too much text");
    expect(err).toBeInstanceOf(Error);
    expect(err.name).toBe("AgentLimitError");
    expect(err.code).toBe("step_too_long");
    expect(err.limit).toBe(10);
    expect(err.message).toBe("step_too_long: too much text");
    expect(String(err)).toBe("AgentLimitError: step_too_long: too much text");
  });
});
