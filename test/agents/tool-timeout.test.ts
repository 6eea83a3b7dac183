import { afterEach, describe, expect, test } from "vitest";
import type { SessionEvent } from "../../protocol/index.js";
import type { AgentLimits } from "../../src/agents/agent-limits.js";
import { type AgentTool, defineTool } from "../../src/agents/agent-tool.js";
import { OpenAIAgent } from "../../src/agents/openai-agent.js";
import { ADMIN } from "../../src/host/principal.js";
import { type HostFixture, openHost, turnEvents } from "../host/host-fixture.js";
import { FakeChatCompletions, textReply, toolCallReply } from "./fake-chat-completions.js";

const S = "tools";
let fake: FakeChatCompletions;
let fx: HostFixture;

async function turnWith(tools: AgentTool[], limits: Partial<AgentLimits> = {}): Promise<SessionEvent[]> {
  fake = await FakeChatCompletions.start();
  fx = await openHost({ agent: new OpenAIAgent({ baseURL: fake.baseURL, model: "m", tools, limits }) });
  await fx.host.call(ADMIN, "session.create", { sessionId: S });
  fake.script(toolCallReply("", [{ id: "a", name: tools[0]!.name, args: {} }]), textReply("done"));
  const r = await fx.host.call(ADMIN, "session.prompt", { sessionId: S, text: "go", clientMessageId: "go" });
  return turnEvents(fx.store, S, r.turnId!);
}

const resultOf = (events: SessionEvent[]) => events.find((e) => e.type === "tool/result")!.data;
/** What the model was told of the call, in its second request. */
const toldModel = () =>
  fake.requests[1]!.body.messages.find((m) => m.role === "tool") as { content: string } | undefined;

afterEach(async () => {
  await fx.dispose();
  await fake.close();
});

describe("a tool call that runs past its time does not hold the turn", () => {
  test("a call that never returns, deaf to its signal: recorded failed at its timeoutMs, the model told, the turn goes on", async () => {
    const hang = defineTool({
      name: "hang",
      inputSchema: { type: "object" },
      timeoutMs: 200,
      execute: () => new Promise(() => {}),
    });
    const events = await turnWith([hang]);
    const timedOut = "tool_timeout: hang gave no result within 200 ms";
    expect(resultOf(events)).toMatchObject({ ok: false, result: { error: timedOut } });
    expect(toldModel()?.content).toContain(timedOut);
    expect(events.at(-1)!.data).toMatchObject({ state: "completed" });
  });

  test("the call's signal is aborted at the timeout, with the timeout as its reason", async () => {
    let reason: unknown;
    const listening = defineTool({
      name: "listening",
      inputSchema: { type: "object" },
      timeoutMs: 150,
      execute: (_input, { signal }) =>
        new Promise((_, reject) =>
          signal.addEventListener("abort", () => {
            reason = signal.reason;
            reject(signal.reason);
          }),
        ),
    });
    const events = await turnWith([listening]);
    expect((reason as Error).message).toBe("tool_timeout: listening gave no result within 150 ms");
    expect(resultOf(events)).toMatchObject({ ok: false });
  });

  test("without a timeoutMs of its own a call has the agent's limits.toolTimeoutMs", async () => {
    const hang = defineTool({
      name: "hang",
      inputSchema: { type: "object" },
      execute: () => new Promise(() => {}),
    });
    const events = await turnWith([hang], { toolTimeoutMs: 250 });
    expect(resultOf(events)).toMatchObject({
      ok: false,
      result: { error: "tool_timeout: hang gave no result within 250 ms" },
    });
  });

  test("timeoutMs: Infinity takes the bound away; it does not fire at once", async () => {
    const slow = defineTool({
      name: "slow",
      inputSchema: { type: "object" },
      timeoutMs: Number.POSITIVE_INFINITY,
      execute: async () => {
        await new Promise((resolve) => setTimeout(resolve, 100));
        return "finished";
      },
    });
    const events = await turnWith([slow]);
    expect(resultOf(events)).toMatchObject({ ok: true, result: "finished" });
  });

  test("a call that answers within its time is recorded with its value", async () => {
    const quick = defineTool({
      name: "quick",
      inputSchema: { type: "object" },
      timeoutMs: 5_000,
      execute: async () => {
        await new Promise((resolve) => setTimeout(resolve, 50));
        return { answer: 42 };
      },
    });
    const events = await turnWith([quick]);
    expect(resultOf(events)).toMatchObject({ ok: true, result: { answer: 42 } });
  });
});
