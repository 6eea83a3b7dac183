import { describe, expect, test } from "vitest";
import { type AgentLimits, DEFAULT_AGENT_LIMITS, resolveAgentLimits } from "../../src/agents/agent-limits.js";
import { defineTool } from "../../src/agents/agent-tool.js";
import { OpenAIAgent } from "../../src/agents/openai-agent.js";

const agent = (limits: Partial<AgentLimits>, timeoutMs?: number) =>
  new OpenAIAgent({
    baseURL: "http://127.0.0.1:9/v1",
    model: "m",
    limits,
    tools: [
      defineTool({
        name: "t",
        inputSchema: { type: "object" },
        ...(timeoutMs !== undefined ? { timeoutMs } : {}),
        execute: () => 1,
      }),
    ],
  });

describe("an agent's limits are checked when it is built", () => {
  test("the defaults, with each limit given taking its place", () => {
    expect(resolveAgentLimits()).toEqual(DEFAULT_AGENT_LIMITS);
    expect(resolveAgentLimits({ maxStepsPerTurn: 3, modelIdleMs: undefined })).toEqual({
      ...DEFAULT_AGENT_LIMITS,
      maxStepsPerTurn: 3,
    });
    // the least of each, and no bound for the two waits
    expect(
      resolveAgentLimits({
        maxStepsPerTurn: 1,
        maxToolCallsPerStep: 1,
        maxStepChars: 1,
        maxHistoryChars: 0,
        modelIdleMs: Number.POSITIVE_INFINITY,
        toolTimeoutMs: 1,
      }),
    ).toEqual({
      maxStepsPerTurn: 1,
      maxToolCallsPerStep: 1,
      maxStepChars: 1,
      maxHistoryChars: 0,
      modelIdleMs: Number.POSITIVE_INFINITY,
      toolTimeoutMs: 1,
    });
  });

  test("a count that is no whole number from its least is refused, naming it and the value", () => {
    const cases: [Partial<AgentLimits>, string][] = [
      [{ maxStepsPerTurn: 0 }, "limits.maxStepsPerTurn must be a whole number from 1, got 0"],
      [
        { maxToolCallsPerStep: Number.NaN },
        "limits.maxToolCallsPerStep must be a whole number from 1, got NaN",
      ],
      [{ maxStepChars: 2.5 }, "limits.maxStepChars must be a whole number from 1, got 2.5"],
      [
        { maxStepsPerTurn: Number.POSITIVE_INFINITY },
        "limits.maxStepsPerTurn must be a whole number from 1, got Infinity",
      ],
      [{ maxHistoryChars: -1 }, "limits.maxHistoryChars must be a whole number from 0, got -1"],
      [
        { maxStepsPerTurn: "8" as unknown as number },
        'limits.maxStepsPerTurn must be a whole number from 1, got "8"',
      ],
    ];
    for (const [limits, message] of cases) expect(() => agent(limits)).toThrow(new TypeError(message));
  });

  test("a wait that is not at least 1 ms or Infinity is refused; so is a name that is no limit", () => {
    const wait = "must be a whole number of ms from 1, or Infinity";
    expect(() => agent({ modelIdleMs: 0 })).toThrow(new TypeError(`limits.modelIdleMs ${wait}, got 0`));
    expect(() => agent({ toolTimeoutMs: Number.NaN })).toThrow(
      new TypeError(`limits.toolTimeoutMs ${wait}, got NaN`),
    );
    expect(() => agent({ modelIdleMs: Number.NEGATIVE_INFINITY })).toThrow(
      new TypeError(`limits.modelIdleMs ${wait}, got -Infinity`),
    );
    expect(() => agent({ maxSteps: 3 } as Partial<AgentLimits>)).toThrow(
      new TypeError("limits.maxSteps is not an agent limit"),
    );
  });

  test("a tool's timeoutMs follows the same rule", () => {
    expect(() => agent({}, Number.POSITIVE_INFINITY)).not.toThrow();
    expect(() => agent({}, 1)).not.toThrow();
    expect(() => agent({}, 0)).toThrow(
      new TypeError("tool t: timeoutMs must be a whole number of ms from 1, or Infinity, got 0"),
    );
    expect(() => agent({}, Number.NaN)).toThrow(
      new TypeError("tool t: timeoutMs must be a whole number of ms from 1, or Infinity, got NaN"),
    );
    // a string is shown as one: `got 5` would read as a value the rule takes
    expect(() => agent({}, "5" as unknown as number)).toThrow(
      new TypeError('tool t: timeoutMs must be a whole number of ms from 1, or Infinity, got "5"'),
    );
    expect(() => agent({ toolTimeoutMs: "600000" as unknown as number })).toThrow(
      new TypeError('limits.toolTimeoutMs must be a whole number of ms from 1, or Infinity, got "600000"'),
    );
  });
});
