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
    defineTool({
      name: "lookup",
      inputSchema: { type: "object", properties: {} },
      execute: () => ({ found: 1 }),
    }),
    defineTool({
      name: "explode",
      inputSchema: { type: "object", properties: {} },
      execute: () => {
        throw new Error("disk on fire");
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

  test("a turn parked in its second step continues after a restart with the model reading what it read before", async () => {
    // an earlier turn: the continued one reads it as history, once
    fake.script(textReply("Hello."));
    const hello = await fx.host.call(ADMIN, "session.prompt", {
      sessionId: S,
      text: "hi",
      clientMessageId: "h",
    });
    await turnEvents(fx.store, S, hello.turnId!);
    const history = [
      { role: "user", content: "hi" },
      { role: "assistant", content: "Hello." },
    ];
    fake.script(
      toolCallReply("Looking. ", [
        { id: "call_l", name: "lookup", args: {} },
        { id: "call_x", name: "explode", args: {} },
        { id: "call_p1", name: "deploy", args: { target: "prod" } },
      ]),
      toolCallReply("Trying again. ", [{ id: "call_p2", name: "deploy", args: { target: "prod" } }]),
    );
    const r = await fx.host.call(ADMIN, "session.prompt", {
      sessionId: S,
      text: "ship",
      clientMessageId: "p",
    });
    // the first approval: a prompt is steered into the turn, then the call is denied
    const first = await pendingInteraction();
    const queued = await fx.host.call(ADMIN, "session.prompt", {
      sessionId: S,
      text: "and hurry",
      clientMessageId: "q",
    });
    await fx.host.call(ADMIN, "session.updateQueue", {
      sessionId: S,
      op: { steer: true, itemId: queued.itemId! },
    });
    await fx.host.call(ADMIN, "session.respond", { interactionId: first, response: { outcome: "deny" } });
    // the second step's approval is still open when the host stops
    const second = await vi.waitFor(
      async () => {
        const id = await pendingInteraction();
        expect(id).not.toBe(first);
        return id;
      },
      { timeout: 15_000, interval: 10 },
    );
    await fx.restart();
    fake.script(textReply("Deployed."));
    await fx.host.call(ADMIN, "session.respond", { interactionId: second, response: { outcome: "approve" } });
    const events = await turnEvents(fx.store, S, r.turnId!);
    expect(events.at(-1)!.data).toMatchObject({ state: "completed" });
    expect(executed).toEqual(["prod"]);

    const beforeRestart = fake.requests[2]!.body.messages;
    expect(beforeRestart).toEqual([
      ...history,
      { role: "user", content: "ship" },
      {
        role: "assistant",
        content: "Looking. ",
        tool_calls: [
          { id: "call_l", type: "function", function: { name: "lookup", arguments: "{}" } },
          { id: "call_x", type: "function", function: { name: "explode", arguments: "{}" } },
          { id: "call_p1", type: "function", function: { name: "deploy", arguments: '{"target":"prod"}' } },
        ],
      },
      { role: "tool", tool_call_id: "call_l", content: '{"found":1}' },
      { role: "tool", tool_call_id: "call_x", content: "disk on fire" },
      { role: "tool", tool_call_id: "call_p1", content: "the operator denied this call" },
      { role: "user", content: "and hurry" },
    ]);
    // rebuilt from the log: every earlier step as it was sent live, then the step that parked
    expect(fake.requests[3]!.body.messages).toEqual([
      ...beforeRestart,
      {
        role: "assistant",
        content: "Trying again. ",
        tool_calls: [
          { id: "call_p2", type: "function", function: { name: "deploy", arguments: '{"target":"prod"}' } },
        ],
      },
      { role: "tool", tool_call_id: "call_p2", content: '{"deployed":"prod"}' },
    ]);
  });

  test("a parked call of a tool the restarted agent no longer has is recorded failed, naming it", async () => {
    fake.script(toolCallReply("", [{ id: "call_p", name: "deploy", args: { target: "prod" } }]));
    const r = await fx.host.call(ADMIN, "session.prompt", {
      sessionId: S,
      text: "ship",
      clientMessageId: "p",
    });
    const interactionId = await pendingInteraction();
    const before = fx;
    await before.host.shutdown();
    await before.store.close();
    fx = await openHost({
      dbPath: before.dbPath,
      agent: new OpenAIAgent({ baseURL: fake.baseURL, model: "fake-model", tools: [] }),
    });
    try {
      fake.script(textReply("It is gone."));
      await fx.host.call(ADMIN, "session.respond", { interactionId, response: { outcome: "approve" } });
      const events = await turnEvents(fx.store, S, r.turnId!);
      expect(shape(events).slice(-3)).toEqual([
        ["tool/result", "call_p", false, { error: "no tool named deploy" }],
        ["assistant/delta", "It is gone."],
        ["turn/end", "completed"],
      ]);
      expect(executed).toEqual([]);
      expect(fake.requests[1]!.body.messages.at(-1)).toEqual({
        role: "tool",
        tool_call_id: "call_p",
        content: "no tool named deploy",
      });
    } finally {
      await fx.dispose();
      fx = before;
    }
  });
});
