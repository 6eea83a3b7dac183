import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { NewEvent, SessionEvent } from "../../protocol/index.js";
import {
  type AssistantTranscriptMessage,
  applyEvent,
  applyEvents,
  emptyTranscript,
  type TranscriptState,
} from "../../protocol/transcript.js";

/** Numbers the events the way the log does: seq from 1, `at` rising. */
function commit(events: NewEvent[], start = 1_700_000_000_000): SessionEvent[] {
  return events.map((e, i) => ({ seq: i + 1, at: start + i * 10, ...e }) as SessionEvent);
}

const created: NewEvent = { type: "session/created", data: { title: "t", model: "demo" } };
const start = (turnId: string): NewEvent => ({ type: "turn/start", data: { turnId, trigger: "prompt" } });
const user = (
  messageId: string,
  text: string,
  extra: Partial<Extract<NewEvent, { type: "user/message" }>["data"]> = {},
): NewEvent => ({
  type: "user/message",
  data: { messageId, source: "user", text, attachments: [], meta: {}, ...extra },
});
const delta = (turnId: string, text: string): NewEvent => ({
  type: "assistant/delta",
  data: { turnId, text },
});
const end = (
  turnId: string,
  state: "completed" | "failed" | "cancelled" | "interrupted" = "completed",
): NewEvent => ({
  type: "turn/end",
  data: { turnId, state },
});

type Action =
  | { a: "prompt"; text: string; display: boolean }
  | { a: "delta"; text: string }
  | { a: "reasoning"; text: string }
  | { a: "toolCall"; name: string }
  | { a: "toolResult"; ok: boolean }
  | { a: "ask"; kind: "approval" | "question" }
  | { a: "resolve"; approve: boolean }
  | { a: "interject"; text: string }
  | { a: "end"; state: "completed" | "failed" | "cancelled" | "interrupted" }
  | { a: "rename"; title: string }
  | { a: "jobStart"; label: string }
  | { a: "jobEnd"; state: "completed" | "failed" | "cancelled" | "interrupted" };

const actionArb: fc.Arbitrary<Action> = fc.oneof(
  fc.record({ a: fc.constant("prompt" as const), text: fc.string({ maxLength: 8 }), display: fc.boolean() }),
  fc.record({ a: fc.constant("delta" as const), text: fc.string({ maxLength: 6 }) }),
  fc.record({ a: fc.constant("reasoning" as const), text: fc.string({ maxLength: 6 }) }),
  fc.record({ a: fc.constant("toolCall" as const), name: fc.constantFrom("grep", "read") }),
  fc.record({ a: fc.constant("toolResult" as const), ok: fc.boolean() }),
  fc.record({
    a: fc.constant("ask" as const),
    kind: fc.constantFrom("approval" as const, "question" as const),
  }),
  fc.record({ a: fc.constant("resolve" as const), approve: fc.boolean() }),
  fc.record({ a: fc.constant("interject" as const), text: fc.string({ maxLength: 6 }) }),
  fc.record({
    a: fc.constant("end" as const),
    state: fc.constantFrom(
      "completed" as const,
      "failed" as const,
      "cancelled" as const,
      "interrupted" as const,
    ),
  }),
  fc.record({ a: fc.constant("rename" as const), title: fc.string({ maxLength: 6 }) }),
  fc.record({ a: fc.constant("jobStart" as const), label: fc.string({ maxLength: 6 }) }),
  fc.record({
    a: fc.constant("jobEnd" as const),
    state: fc.constantFrom(
      "completed" as const,
      "failed" as const,
      "cancelled" as const,
      "interrupted" as const,
    ),
  }),
);

/** Turns random actions into a history the host could have written (actions that do not fit are skipped). */
function historyOf(actions: Action[]): SessionEvent[] {
  const out: NewEvent[] = [created];
  let turn: string | null = null;
  let turns = 0;
  let ids = 0;
  const openTools: string[] = [];
  const pending: string[] = [];
  const jobs: string[] = [];
  for (const act of actions) {
    if (act.a === "rename") out.push({ type: "session/renamed", data: { title: act.title } });
    // a job outlives its turn: it may end in a later turn or between turns
    else if (act.a === "jobEnd") {
      const id = jobs.shift();
      if (id) out.push({ type: "job/ended", data: { jobId: id, state: act.state } });
    } else if (act.a === "prompt") {
      if (turn) continue;
      turn = `t${++turns}`;
      out.push(start(turn), user(`m${++ids}`, act.text, act.display ? { display: `shown ${act.text}` } : {}));
    } else if (!turn) {
    } else if (act.a === "delta") out.push(delta(turn, act.text));
    else if (act.a === "reasoning")
      out.push({ type: "reasoning/delta", data: { turnId: turn, text: act.text } });
    else if (act.a === "toolCall") {
      const id = `c${++ids}`;
      openTools.push(id);
      out.push({
        type: "tool/call",
        data: { turnId: turn, toolCallId: id, name: act.name, args: { q: id } },
      });
    } else if (act.a === "toolResult") {
      const id = openTools.shift();
      if (id)
        out.push({
          type: "tool/result",
          data: { turnId: turn, toolCallId: id, ok: act.ok, result: id, durationMs: 3 },
        });
    } else if (act.a === "ask") {
      const id = `i${++ids}`;
      pending.push(id);
      out.push({
        type: "interaction/requested",
        data: {
          turnId: turn,
          interactionId: id,
          kind: act.kind,
          ...(act.kind === "approval" ? { action: "rm" } : { question: "?" }),
        },
      });
    } else if (act.a === "resolve") {
      const id = pending.shift();
      if (id) {
        out.push({
          type: "interaction/resolved",
          data: { interactionId: id, resolution: act.approve ? { outcome: "approve" } : { answer: "yes" } },
        });
      }
    } else if (act.a === "jobStart") {
      const id = `j${++ids}`;
      jobs.push(id);
      out.push({ type: "job/started", data: { jobId: id, label: act.label, turnId: turn } });
    } else if (act.a === "interject") out.push(user(`m${++ids}`, act.text, { interjection: true }));
    else if (act.a === "end") {
      out.push(end(turn, act.state));
      turn = null;
      openTools.length = 0;
      pending.length = 0;
    }
  }
  return commit(out);
}

function chunks<T>(items: T[], cuts: number[]): T[][] {
  const points = [...new Set(cuts.map((c) => c % (items.length + 1)))].sort((a, b) => a - b);
  const out: T[][] = [];
  let from = 0;
  for (const p of [...points, items.length]) {
    out.push(items.slice(from, p));
    from = p;
  }
  return out;
}

describe("transcript reducer: live equals replay", () => {
  it("gives the same transcript fed one event at a time, all at once, or in random chunks", () => {
    fc.assert(
      fc.property(
        fc.array(actionArb, { maxLength: 80 }),
        fc.array(fc.nat(), { maxLength: 6 }),
        (actions, cuts) => {
          const events = historyOf(actions);
          const replay = applyEvents(emptyTranscript(), events);
          let live = emptyTranscript();
          for (const e of events) live = applyEvent(live, e);
          let chunked = emptyTranscript();
          for (const part of chunks(events, cuts)) {
            const before: TranscriptState = structuredClone(chunked);
            const next = applyEvents(chunked, part);
            // Pure: the previous state is untouched by the next batch.
            expect(chunked).toEqual(before);
            chunked = next;
          }
          expect(live).toEqual(replay);
          expect(chunked).toEqual(replay);
        },
      ),
      { numRuns: 300 },
    );
  });

  it("ignores events at or below the last applied seq (re-delivery)", () => {
    const events = historyOf([
      { a: "prompt", text: "hi", display: false },
      { a: "delta", text: "yo" },
    ]);
    const once = applyEvents(emptyTranscript(), events);
    expect(applyEvents(once, events)).toBe(once);
  });
});

describe("transcript reducer: rules", () => {
  it("shows the operator's display text and keeps attachments", () => {
    const shell = { name: "a.png", type: "image/png", size: 3, attachmentId: "att1" };
    const s = applyEvents(
      emptyTranscript(),
      commit([
        created,
        start("t1"),
        user("m1", "model text", { display: "shown text", attachments: [shell] }),
      ]),
    );
    expect(s.messages).toEqual([
      expect.objectContaining({
        role: "user",
        id: "m1",
        text: "shown text",
        attachments: [shell],
        turnId: "t1",
      }),
    ]);
    expect(s.title).toBe("t");
  });

  it("joins deltas into one assistant message with one text segment", () => {
    const s = applyEvents(
      emptyTranscript(),
      commit([created, start("t1"), user("m1", "q"), delta("t1", "a"), delta("t1", "b")]),
    );
    const a = s.messages[1];
    expect(a).toMatchObject({
      role: "assistant",
      id: "t1.0",
      text: "ab",
      segments: [{ kind: "text", text: "ab" }],
    });
    expect(s.streaming).toBe(true);
    expect(s.turns[0]).toMatchObject({ turnId: "t1", state: "working", endedAt: null });
  });

  it("places an interjection at its position and puts later text on a new trailing assistant message", () => {
    const s = applyEvents(
      emptyTranscript(),
      commit([
        created,
        start("t1"),
        user("m1", "q"),
        delta("t1", "before"),
        user("m2", "wait", { interjection: true }),
        delta("t1", "after"),
        end("t1"),
      ]),
    );
    expect(s.messages.map((m) => [m.role, m.text])).toEqual([
      ["user", "q"],
      ["assistant", "before"],
      ["user", "wait"],
      ["assistant", "after"],
    ]);
    expect(s.messages[2]).toMatchObject({ interjection: true, turnId: "t1" });
    expect(s.messages[3]?.id).toBe("t1.1");
  });

  it("records tool calls with their results and a tool segment in order", () => {
    const s = applyEvents(
      emptyTranscript(),
      commit([
        created,
        start("t1"),
        user("m1", "q"),
        delta("t1", "look"),
        { type: "tool/call", data: { turnId: "t1", toolCallId: "c1", name: "grep", args: { q: 1 } } },
        {
          type: "tool/result",
          data: { turnId: "t1", toolCallId: "c1", ok: true, result: "found", durationMs: 12 },
        },
        delta("t1", "done"),
      ]),
    );
    const a = s.messages[1];
    expect(a).toMatchObject({
      segments: [
        { kind: "text", text: "look" },
        { kind: "tool", toolId: "c1" },
        { kind: "text", text: "done" },
      ],
      toolCalls: [{ id: "c1", name: "grep", args: { q: 1 }, ok: true, result: "found", duration_ms: 12 }],
    });
  });

  it("shows a job where it started and fills in its outcome when it ends, turns later", () => {
    const first = commit([
      created,
      start("t1"),
      user("m1", "run it"),
      delta("t1", "starting"),
      { type: "job/started", data: { jobId: "j1", label: "nightly build", turnId: "t1" } },
      { type: "job/started", data: { jobId: "j2", label: "lint", turnId: "t1" } },
      end("t1"),
      start("t2"),
      user("m2", "meanwhile"),
      delta("t2", "sure"),
    ]);
    const running = applyEvents(emptyTranscript(), first);
    expect(running.messages[1]).toMatchObject({
      segments: [
        { kind: "text", text: "starting" },
        { kind: "job", jobId: "j1" },
        { kind: "job", jobId: "j2" },
      ],
      jobs: [
        { jobId: "j1", label: "nightly build", startedAt: first[4]!.at, state: "running", endedAt: null },
        { jobId: "j2", label: "lint", state: "running", endedAt: null },
      ],
    });
    const ended = { seq: first.length + 1, at: first.at(-1)!.at + 10 };
    // the second job ends first: each end finds its own job, whatever the order
    const later = applyEvents(running, [
      { ...ended, type: "job/ended", data: { jobId: "j2", state: "interrupted" } },
    ] as SessionEvent[]);
    expect((later.messages[1] as AssistantTranscriptMessage).jobs).toEqual([
      { jobId: "j1", label: "nightly build", startedAt: first[4]!.at, state: "running", endedAt: null },
      { jobId: "j2", label: "lint", startedAt: first[5]!.at, state: "interrupted", endedAt: ended.at },
    ]);
    // the message of the later turn is untouched, and the earlier state is not changed in place
    expect(later.messages[3]).toBe(running.messages[3]);
    expect((running.messages[1] as AssistantTranscriptMessage).jobs[1]?.state).toBe("running");
    expect(later.runningJobs).toEqual([{ jobId: "j1", message: 1 }]);
    const both = applyEvents(later, [
      { seq: ended.seq + 1, at: ended.at + 5, type: "job/ended", data: { jobId: "j1", state: "completed" } },
    ] as SessionEvent[]);
    expect((both.messages[1] as AssistantTranscriptMessage).jobs.map((j) => [j.jobId, j.state])).toEqual([
      ["j1", "completed"],
      ["j2", "interrupted"],
    ]);
    expect(both.runningJobs).toEqual([]);
    // an end for a job this transcript never saw start (before a clear) changes nothing
    const unknown = { seq: ended.seq + 2, at: ended.at + 10 };
    const after = applyEvents(both, [
      { ...unknown, type: "job/ended", data: { jobId: "j9", state: "completed" } },
    ] as SessionEvent[]);
    expect(after.messages).toEqual(both.messages);
  });
  it("keeps on the turn and the job it ended that a fork ended them, and on no other end", () => {
    const log = commit([
      created,
      start("t1"),
      user("m1", "run it"),
      { type: "job/started", data: { jobId: "j1", label: "build", turnId: "t1" } },
      { type: "job/started", data: { jobId: "j2", label: "lint", turnId: "t1" } },
      { type: "job/ended", data: { jobId: "j1", state: "interrupted", byFork: true } },
      { type: "job/ended", data: { jobId: "j2", state: "interrupted" } },
      { type: "turn/end", data: { turnId: "t1", state: "interrupted", byFork: true } },
    ]);
    const s = applyEvents(emptyTranscript(), log);
    expect((s.messages[1] as AssistantTranscriptMessage).jobs.map((j) => [j.jobId, j.byFork])).toEqual([
      ["j1", true],
      ["j2", undefined],
    ]);
    expect(s.turns).toMatchObject([{ turnId: "t1", state: "interrupted", byFork: true }]);
    const hostStop = applyEvents(emptyTranscript(), [
      ...log.slice(0, -1),
      { ...log.at(-1)!, data: { turnId: "t1", state: "interrupted" } },
    ] as SessionEvent[]);
    expect(hostStop.turns[0]).not.toHaveProperty("byFork");
  });
  it("tracks pending interactions, the input-required state and the answer in a block segment", () => {
    const asked = commit([
      created,
      start("t1"),
      user("m1", "q"),
      {
        type: "interaction/requested",
        data: { turnId: "t1", interactionId: "i1", kind: "approval", action: "rm -rf" },
      },
    ]);
    const s1 = applyEvents(emptyTranscript(), asked);
    expect(s1.pending).toEqual([
      {
        interactionId: "i1",
        turnId: "t1",
        kind: "approval",
        action: "rm -rf",
        requestedAt: asked[3]!.at,
        seq: 4,
      },
    ]);
    expect(s1.turns[0]?.state).toBe("input-required");
    const s2 = applyEvent(s1, {
      seq: 5,
      at: asked[3]!.at + 1,
      type: "interaction/resolved",
      data: { interactionId: "i1", resolution: { outcome: "deny" } },
    });
    expect(s2.pending).toEqual([]);
    expect(s2.turns[0]?.state).toBe("working");
    expect(s2.messages[1]).toMatchObject({
      segments: [
        { kind: "block", block: { interactionId: "i1", kind: "approval", resolution: { outcome: "deny" } } },
      ],
    });
    expect(s1.messages[1]).toMatchObject({ segments: [{ kind: "block", block: { resolution: null } }] });
  });

  it("keeps the tool call an interaction is about, pending and in its card; one about none names none", () => {
    const s = applyEvents(
      emptyTranscript(),
      commit([
        created,
        start("t1"),
        user("m1", "q"),
        { type: "tool/call", data: { turnId: "t1", toolCallId: "c1", name: "deploy", args: {} } },
        {
          type: "interaction/requested",
          data: { turnId: "t1", interactionId: "i1", kind: "approval", action: "deploy", toolCallId: "c1" },
        },
        {
          type: "interaction/requested",
          data: { turnId: "t1", interactionId: "i2", kind: "question", question: "why?" },
        },
      ]),
    );
    expect(s.pending.map((p) => [p.interactionId, p.toolCallId])).toEqual([
      ["i1", "c1"],
      ["i2", undefined],
    ]);
    expect(s.pending[1]).not.toHaveProperty("toolCallId");
    const agent = s.messages[1] as AssistantTranscriptMessage;
    const blocks = agent.segments.flatMap((g) => (g.kind === "block" ? [g.block] : []));
    expect(blocks[0]).toMatchObject({ interactionId: "i1", toolCallId: "c1", resolution: null });
    expect(blocks[1]).not.toHaveProperty("toolCallId");
  });

  it("marks an interrupted turn, closes streaming and drops its unanswered interactions", () => {
    const s = applyEvents(
      emptyTranscript(),
      commit([
        created,
        start("t1"),
        user("m1", "q"),
        {
          type: "interaction/requested",
          data: { turnId: "t1", interactionId: "i1", kind: "question", question: "?" },
        },
        end("t1", "interrupted"),
      ]),
    );
    expect(s.turns[0]).toMatchObject({ state: "interrupted", interrupted: true });
    expect(s.turns[0]?.endedAt).not.toBeNull();
    expect(s.pending).toEqual([]);
    expect(s.streaming).toBe(false);
    expect(s.openTurnId).toBeNull();
  });

  it("starts each turn's assistant output on its own message", () => {
    const s = applyEvents(
      emptyTranscript(),
      commit([
        created,
        start("t1"),
        user("m1", "a"),
        delta("t1", "x"),
        end("t1"),
        start("t2"),
        user("m2", "b"),
        delta("t2", "y"),
      ]),
    );
    expect(s.messages.map((m) => m.id)).toEqual(["m1", "t1.0", "m2", "t2.0"]);
    expect(s.turns.map((t) => t.state)).toEqual(["completed", "working"]);
  });

  it("interrupted is true whenever the turn was stopped early, cancelled included", () => {
    const states = ["completed", "failed", "cancelled", "interrupted"] as const;
    const s = applyEvents(
      emptyTranscript(),
      commit([
        created,
        ...states.flatMap((state, i) => [start(`t${i}`), user(`m${i}`, "q"), end(`t${i}`, state)]),
      ]),
    );
    expect(s.turns.map((t) => [t.state, t.interrupted])).toEqual([
      ["completed", false],
      ["failed", false],
      ["cancelled", true],
      ["interrupted", true],
    ]);
  });

  it("numbers messages 1, 2, 3… in transcript order, the same live and replayed", () => {
    const log = commit([
      created,
      start("t1"),
      user("m1", "a"),
      delta("t1", "x"),
      user("m2", "steer", { interjection: true }),
      delta("t1", "y"),
      end("t1"),
      start("t2"),
      user("m3", "b"),
      delta("t2", "z"),
    ]);
    const whole = applyEvents(emptyTranscript(), log);
    expect(whole.messages.map((m) => [m.index, m.id])).toEqual([
      [1, "m1"],
      [2, "t1.0"],
      [3, "m2"],
      [4, "t1.1"],
      [5, "m3"],
      [6, "t2.0"],
    ]);
    const live = log.reduce((state, e) => applyEvents(state, [e]), emptyTranscript());
    expect(live.messages.map((m) => m.index)).toEqual(whole.messages.map((m) => m.index));
  });

  it("skips prompts stamped with an origin or hidden, and only those", () => {
    const s = applyEvents(
      emptyTranscript(),
      commit([
        created,
        start("t1"),
        user("m1", "typed", { meta: { voiceInput: true, incognito: true } }),
        end("t1"),
        start("t2"),
        user("m2", "scheduled", { meta: { origin: "scheduler" } }),
        end("t2"),
        start("t3"),
        user("m3", "stamped", { meta: { hidden: true } }),
        end("t3"),
        start("t4"),
        user("m4", "", { hidden: true }),
        end("t4"),
      ]),
    );
    expect(s.messages.map((m) => [m.id, m.role === "user" && m.hidden])).toEqual([
      ["m1", false],
      ["m2", true],
      ["m3", true],
      ["m4", true],
    ]);
  });

  it("a reset is a fresh state", () => {
    expect(emptyTranscript()).toEqual(applyEvents(emptyTranscript(), []));
  });
});
