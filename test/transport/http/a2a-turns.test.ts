import { afterEach, describe, expect, it } from "vitest";
import type { NewEvent, SessionEvent } from "../../../protocol/index.js";
import { demoAgentWith } from "../../host/host-fixture.js";
import { turnEnd, turnStart } from "../../store/open-store.js";
import { gate } from "../../support/gate.js";
import { ALICE_TOKEN, startTestHost, type TestHost } from "../../support/host.js";
import { until } from "../../support/until.js";
import { readWholeLog } from "../../support/whole-log.js";
import { ALICE, api, newSession, prompt, waitForState } from "./http-client.js";

/**
 * `GET /api/chat/sessions/{id}/turns` row by row (protocol-v1 §8): the A2A Task of each turn as
 * its log says, and the prompts still queued, read over HTTP from a real host.
 */

let h: TestHost | undefined;
const opened: (() => void)[] = [];
afterEach(async () => {
  for (const open of opened.splice(0)) open();
  await h?.dispose();
  h = undefined;
});

const iso = (at: number) => new Date(at).toISOString();

async function turnsOf(sessionId: string, query = ""): Promise<Record<string, unknown>[]> {
  const reply = await api(h!, `/api/chat/sessions/${sessionId}/turns${query}`, { token: ALICE_TOKEN });
  expect(reply.status).toBe(200);
  return (reply.json as { turns: Record<string, unknown>[] }).turns;
}

/** Appends once the clock has moved past the previous append, so each batch has its own `at`. */
async function appendLater(sessionId: string, events: NewEvent[]): Promise<void> {
  const before = Date.now();
  await until(() => Date.now() > before, 1_000, "the clock to move");
  expect((await h!.store.append(sessionId, events)).status).toBe("appended");
}

function user(messageId: string, text: string, extra: Record<string, unknown> = {}): NewEvent {
  return {
    type: "user/message",
    data: { messageId, source: "user", text, attachments: [], meta: {}, ...extra },
  } as NewEvent;
}

const agentText = (turnId: string, text: string): NewEvent => ({
  type: "assistant/delta",
  data: { turnId, text },
});

describe("GET /api/chat/sessions/{id}/turns: the rows", () => {
  it("one A2A task per turn as its log says: history, answers, states, metadata and times", async () => {
    h = await startTestHost();
    const sessionId = "a2a-rows";
    await h.store.create({ sessionId, owner: "alice", model: "demo-fast" });
    // a finished turn: the prompt as shown, with its files, an interjection and a hidden prompt
    await appendLater(sessionId, [
      turnStart("t1"),
      user("m1", "model-facing", {
        display: "as typed",
        attachments: [
          { name: "a b.txt", type: "text/plain", size: 3, attachmentId: "att 1" },
          { name: "u.png", type: "image/png", size: 5, url: "https://files.example/u.png" },
          { name: "dropped", type: "text/plain", size: 1 },
        ],
      }),
    ]);
    await appendLater(sessionId, [agentText("t1", "first")]);
    await appendLater(sessionId, [
      user("m2", "wait", { interjection: true }),
      agentText("t1", "second"),
      user("m3", "not for the operator", { hidden: true }),
    ]);
    await appendLater(sessionId, [turnEnd("t1")]);
    // a prompt outside any turn belongs to none
    await appendLater(sessionId, [user("m4", "between turns")]);
    // a turn the host stopped, with no answer; one cancelled before any message
    await appendLater(sessionId, [
      { type: "turn/start", data: { turnId: "t2", trigger: "server" } },
      // an agent message with a tool call and no text: in the history, not an answer
      { type: "tool/call", data: { turnId: "t2", toolCallId: "c1", name: "cat", args: {} } },
      { type: "turn/end", data: { turnId: "t2", state: "interrupted", error: "host stopped" } },
    ]);
    await appendLater(sessionId, [turnStart("t3"), turnEnd("t3", "cancelled")]);
    // a running turn: its newest output is its time
    await appendLater(sessionId, [turnStart("t4")]);
    await appendLater(sessionId, [agentText("t4", "so far")]);

    const log = (await readWholeLog(h.store, sessionId)) as { events: SessionEvent[] };
    const at = (type: string, turnId: string, nth = 0) =>
      log.events.filter((e) => e.type === type && (e.data as { turnId?: string }).turnId === turnId)[nth]!.at;

    const rows = await turnsOf(sessionId);
    expect(rows.map((r) => r.task_id)).toEqual(["t4", "t3", "t2", "t1"]);
    const [t4, t3, t2, t1] = rows;
    expect(t1).toEqual({
      kind: "task",
      id: "t1",
      contextId: sessionId,
      task_id: "t1",
      state: "completed",
      last_updated: iso(at("turn/end", "t1")),
      text: "first\n\nsecond",
      status: { state: "completed", timestamp: iso(at("turn/end", "t1")) },
      artifacts: [
        {
          artifactId: "t1-answer",
          name: "answer",
          parts: [
            { kind: "text", text: "first" },
            { kind: "text", text: "second" },
          ],
        },
      ],
      history: [
        {
          kind: "message",
          messageId: "m1",
          role: "user",
          parts: [
            { kind: "text", text: "as typed" },
            {
              kind: "file",
              file: { name: "a b.txt", mimeType: "text/plain", uri: "/v1/attachments/att%201" },
            },
            {
              kind: "file",
              file: { name: "u.png", mimeType: "image/png", uri: "https://files.example/u.png" },
            },
          ],
          contextId: sessionId,
          taskId: "t1",
        },
        {
          kind: "message",
          messageId: "t1.0",
          role: "agent",
          parts: [{ kind: "text", text: "first" }],
          contextId: sessionId,
          taskId: "t1",
        },
        {
          kind: "message",
          messageId: "m2",
          role: "user",
          parts: [{ kind: "text", text: "wait" }],
          contextId: sessionId,
          taskId: "t1",
          metadata: { interjection: true },
        },
        {
          kind: "message",
          messageId: "t1.1",
          role: "agent",
          parts: [{ kind: "text", text: "second" }],
          contextId: sessionId,
          taskId: "t1",
        },
      ],
      metadata: { trigger: "prompt", sessionmux_state: "completed" },
    });
    expect(t2).toMatchObject({
      state: "failed",
      status: { state: "failed" },
      text: "",
      artifacts: [],
      history: [{ messageId: "t2.0", role: "agent", parts: [{ kind: "text", text: "" }] }],
      last_updated: iso(at("turn/end", "t2")),
    });
    expect(t2!.metadata).toEqual({
      trigger: "server",
      sessionmux_state: "interrupted",
      interrupted: true,
      error: "host stopped",
    });
    expect(t3).toMatchObject({ state: "canceled", status: { state: "canceled" }, text: "", history: [] });
    expect(t3!.metadata).toEqual({ trigger: "prompt", sessionmux_state: "cancelled", interrupted: true });
    expect(t4).toMatchObject({
      state: "working",
      status: { state: "working", timestamp: iso(at("assistant/delta", "t4")) },
      last_updated: iso(at("assistant/delta", "t4")),
      text: "so far",
    });
    expect(t4!.metadata).toEqual({ trigger: "prompt", sessionmux_state: "working" });
    expect(at("assistant/delta", "t4")).toBeGreaterThan(at("turn/start", "t4"));

    // limit counts rows newest first: exactly that many, one past is all there are
    expect((await turnsOf(sessionId, "?limit=3")).map((r) => r.task_id)).toEqual(["t4", "t3", "t2"]);
    expect((await turnsOf(sessionId, "?limit=4")).map((r) => r.task_id)).toEqual(["t4", "t3", "t2", "t1"]);
    expect((await turnsOf(sessionId, "?limit=5")).map((r) => r.task_id)).toEqual(["t4", "t3", "t2", "t1"]);
  });

  it("queued prompts come first as submitted tasks, newest first, and count against limit", async () => {
    const held = gate();
    opened.push(held.open);
    h = await startTestHost({
      agent: demoAgentWith("held", async (turn) => {
        await held.promise;
        await turn.emit({ type: "assistant/delta", text: "done" });
        return { state: "completed" };
      }),
    });
    const sessionId = await newSession(h, ALICE, "first");
    await waitForState(h, sessionId, "working");
    const second = await prompt(h, ALICE, sessionId, "second");
    const third = await prompt(h, ALICE, sessionId, "third");
    expect([second.queued, third.queued]).toEqual([true, true]);
    const queue = h.host.live.queue(sessionId);
    expect(queue.map((q) => q.text)).toEqual(["second", "third"]);

    const rows = await turnsOf(sessionId);
    expect(rows.map((r) => r.state)).toEqual(["submitted", "submitted", "working"]);
    const queuedRow = (item: (typeof queue)[number]) => ({
      kind: "task",
      id: item.itemId,
      contextId: sessionId,
      task_id: item.itemId,
      state: "submitted",
      last_updated: iso(item.queuedAt),
      text: "",
      status: { state: "submitted", timestamp: iso(item.queuedAt) },
      artifacts: [],
      history: [
        {
          kind: "message",
          messageId: item.itemId,
          role: "user",
          parts: [{ kind: "text", text: item.text }],
          contextId: sessionId,
          taskId: item.itemId,
        },
      ],
      metadata: { queued: true },
    });
    expect(rows.slice(0, 2)).toEqual([queuedRow(queue[1]!), queuedRow(queue[0]!)]);
    expect((await turnsOf(sessionId, "?limit=1")).map((r) => r.text)).toEqual([""]);
    expect((await turnsOf(sessionId, "?limit=1"))[0]!.id).toBe(queue[1]!.itemId);
    expect((await turnsOf(sessionId, "?limit=2")).map((r) => r.id)).toEqual([
      queue[1]!.itemId,
      queue[0]!.itemId,
    ]);
    expect((await turnsOf(sessionId, "?limit=3")).map((r) => r.state)).toEqual([
      "submitted",
      "submitted",
      "working",
    ]);
    held.open();
    await waitForState(h, sessionId, "completed");
  });
});

describe("GET /api/chat/sessions/{id}/turns: what a waiting task waits for", () => {
  it("an input-required task's status message names each pending question, in words and as pending_questions spells it", async () => {
    h = await startTestHost();
    const sessionId = "a2a-waiting";
    await h.store.create({ sessionId, owner: "alice", model: "demo-fast" });
    await appendLater(sessionId, [
      turnStart("t1"),
      user("m1", "ship it"),
      { type: "tool/call", data: { turnId: "t1", toolCallId: "c1", name: "deploy", args: {} } },
      {
        type: "interaction/requested",
        data: {
          turnId: "t1",
          interactionId: "i1",
          kind: "approval",
          action: "deploy prod",
          toolCallId: "c1",
        },
      },
      {
        type: "interaction/requested",
        data: {
          turnId: "t1",
          interactionId: "i2",
          kind: "question",
          question: "Which region?",
          options: ["eu", "us"],
        },
      },
    ] as NewEvent[]);
    const { events } = (await readWholeLog(h.store, sessionId)) as { events: SessionEvent[] };
    const requestedAt = (id: string) =>
      events.find((e) => e.type === "interaction/requested" && e.data.interactionId === id)!.at;
    const [waiting] = await turnsOf(sessionId);
    expect(waiting!.state).toBe("input-required");
    const pendingQuestion = (id: string, extra: Record<string, unknown>) => ({
      interaction_id: id,
      session_id: sessionId,
      turn_id: "t1",
      requested_at_ms: requestedAt(id),
      ...extra,
    });
    expect((waiting!.status as { message?: unknown }).message).toEqual({
      kind: "message",
      messageId: "t1.input-required",
      role: "agent",
      parts: [
        { kind: "text", text: "Approval needed: deploy prod" },
        {
          kind: "data",
          data: pendingQuestion("i1", { kind: "approval", action: "deploy prod", tool_call_id: "c1" }),
        },
        { kind: "text", text: "Which region? (eu / us)" },
        {
          kind: "data",
          data: pendingQuestion("i2", { kind: "question", question: "Which region?", options: ["eu", "us"] }),
        },
      ],
      contextId: sessionId,
      taskId: "t1",
    });
    // the view's pending questions are the same objects
    const view = await api(h, `/v1/sessions/${sessionId}`, { token: ALICE_TOKEN });
    expect((view.json as { pending_questions: unknown[] }).pending_questions).toEqual([
      pendingQuestion("i1", { kind: "approval", action: "deploy prod", tool_call_id: "c1" }),
      pendingQuestion("i2", { kind: "question", question: "Which region?", options: ["eu", "us"] }),
    ]);

    // answered one by one: the message names what is left, then the task works on without one
    await appendLater(sessionId, [
      { type: "interaction/resolved", data: { interactionId: "i1", resolution: { outcome: "approve" } } },
    ] as NewEvent[]);
    const [oneLeft] = await turnsOf(sessionId);
    expect((oneLeft!.status as { message: { parts: unknown[] } }).message.parts).toHaveLength(2);
    await appendLater(sessionId, [
      { type: "interaction/resolved", data: { interactionId: "i2", resolution: { answer: "eu" } } },
    ] as NewEvent[]);
    const [working] = await turnsOf(sessionId);
    expect(working!.state).toBe("working");
    expect(working!.status).not.toHaveProperty("message");
  });
});
