import { afterEach, beforeEach, describe, expect, test, vi } from "vitest";
import type { SessionEvent } from "../../protocol/index.js";
import { type AgentTool, defineTool } from "../../src/agents/agent-tool.js";
import { OpenAIAgent } from "../../src/agents/openai-agent.js";
import { ADMIN } from "../../src/host/principal.js";
import { type HostFixture, openHost, readLog, turnEvents } from "../host/host-fixture.js";
import { FakeChatCompletions, textReply, toolCallReply } from "./fake-chat-completions.js";

const S = "parked";
let fake: FakeChatCompletions;
let fx: HostFixture;
let executed: string[];

function approvalTools(): AgentTool[] {
  return [
    defineTool({
      name: "deploy",
      inputSchema: { type: "object", properties: { target: { type: "string" } } },
      needsApproval: (input: { target: string }) => input.target === "prod",
      describe: (input: { target: string }) => `deploy to ${input.target}`,
      execute: (input: { target: string }) => {
        executed.push(input.target);
        return { deployed: input.target };
      },
    }),
  ];
}

const shape = (events: SessionEvent[]) =>
  events.map((e) => {
    const d = e.data as Record<string, unknown>;
    if (e.type === "tool/result") return [e.type, d.toolCallId, d.ok, d.result];
    if (e.type === "tool/call") return [e.type, d.toolCallId, d.args];
    if (e.type === "interaction/requested") return [e.type, d.action, d.toolCallId];
    if (e.type === "interaction/resolved") return [e.type, d.resolution];
    if (e.type === "turn/end") return [e.type, d.state];
    return [e.type, d.text ?? d.trigger];
  });

async function pendingInteraction(): Promise<string> {
  return vi.waitFor(
    async () => {
      const asked = (await readLog(fx.store, S)).findLast((e) => e.type === "interaction/requested");
      if (asked?.type !== "interaction/requested") throw new Error("no interaction yet");
      return asked.data.interactionId;
    },
    { timeout: 15_000, interval: 10 },
  );
}

beforeEach(async () => {
  executed = [];
  fake = await FakeChatCompletions.start();
  fx = await openHost({
    agent: new OpenAIAgent({ baseURL: fake.baseURL, model: "fake-model", tools: approvalTools() }),
  });
  await fx.host.call(ADMIN, "session.create", { sessionId: S });
});
afterEach(async () => {
  await fx.dispose();
  await fake.close();
});

describe("approvals of the AI SDK agent", () => {
  test("a turn parked on an approval when its host stops runs the tool once when answered after the restart", async () => {
    fake.script(
      toolCallReply("Deploying both. ", [
        { id: "call_s", name: "deploy", args: { target: "staging" } },
        { id: "call_p", name: "deploy", args: { target: "prod" } },
      ]),
    );
    const r = await fx.host.call(ADMIN, "session.prompt", {
      sessionId: S,
      text: "ship it",
      clientMessageId: "p",
    });
    const interactionId = await pendingInteraction();
    // approvals come first: nothing of the step ran before the host stopped
    expect(executed).toEqual([]);
    await fx.restart();
    fake.script(textReply("Both deployed."));
    await fx.host.call(ADMIN, "session.respond", { interactionId, response: { outcome: "approve" } });
    const events = await turnEvents(fx.store, S, r.turnId!);
    expect(shape(events)).toEqual([
      ["turn/start", "prompt"],
      ["user/message", "ship it"],
      ["assistant/delta", "Deploying both. "],
      ["tool/call", "call_s", { target: "staging" }],
      ["tool/call", "call_p", { target: "prod" }],
      ["interaction/requested", "deploy to prod", "call_p"],
      ["interaction/resolved", { outcome: "approve" }],
      ["tool/result", "call_s", true, { deployed: "staging" }],
      ["tool/result", "call_p", true, { deployed: "prod" }],
      ["assistant/delta", "Both deployed."],
      ["turn/end", "completed"],
    ]);
    expect(executed.sort()).toEqual(["prod", "staging"]);
    // the continued turn sent what the first process had seen, rebuilt from the log
    expect(fake.requests[1]!.body.messages).toEqual([
      { role: "user", content: "ship it" },
      {
        role: "assistant",
        content: "Deploying both. ",
        tool_calls: [
          { id: "call_s", type: "function", function: { name: "deploy", arguments: '{"target":"staging"}' } },
          { id: "call_p", type: "function", function: { name: "deploy", arguments: '{"target":"prod"}' } },
        ],
      },
      { role: "tool", tool_call_id: "call_s", content: '{"deployed":"staging"}' },
      { role: "tool", tool_call_id: "call_p", content: '{"deployed":"prod"}' },
    ]);
  });

  test("a denied call does not run; the model is told it was denied and the turn goes on", async () => {
    fake.script(
      toolCallReply("", [{ id: "call_p", name: "deploy", args: { target: "prod" } }]),
      textReply("Not deployed."),
    );
    const r = await fx.host.call(ADMIN, "session.prompt", {
      sessionId: S,
      text: "ship",
      clientMessageId: "p",
    });
    await fx.host.call(ADMIN, "session.respond", {
      interactionId: await pendingInteraction(),
      response: { outcome: "deny" },
    });
    const events = await turnEvents(fx.store, S, r.turnId!);
    expect(shape(events).slice(2)).toEqual([
      ["tool/call", "call_p", { target: "prod" }],
      ["interaction/requested", "deploy to prod", "call_p"],
      ["interaction/resolved", { outcome: "deny" }],
      ["tool/result", "call_p", false, { denied: true, reason: "the operator denied this call" }],
      ["assistant/delta", "Not deployed."],
      ["turn/end", "completed"],
    ]);
    expect(executed).toEqual([]);
    expect(fake.requests[1]!.body.messages.at(-1)).toEqual({
      role: "tool",
      tool_call_id: "call_p",
      content: "the operator denied this call",
    });
  });

  test("a call of an unknown tool is recorded failed and the model reads why", async () => {
    fake.script(toolCallReply("", [{ id: "call_z", name: "launch", args: {} }]), textReply("Sorry."));
    const r = await fx.host.call(ADMIN, "session.prompt", {
      sessionId: S,
      text: "launch",
      clientMessageId: "p",
    });
    const events = await turnEvents(fx.store, S, r.turnId!);
    const result = events.find((e) => e.type === "tool/result");
    expect(result?.data).toMatchObject({
      toolCallId: "call_z",
      ok: false,
      result: { error: expect.stringContaining("launch") },
    });
    expect(events.at(-1)).toMatchObject({ type: "turn/end", data: { state: "completed" } });
    expect(fake.requests[1]!.body.messages.at(-1)).toMatchObject({ role: "tool", tool_call_id: "call_z" });
  });
});
