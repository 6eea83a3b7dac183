import { describe, expect, it } from "vitest";
import type { NewEvent, SessionEvent } from "../../protocol/index.js";
import { applyEvents, emptyTranscript, type TranscriptState } from "../../protocol/transcript.js";

/**
 * The transcript reducer's rules one by one, each on a short log whose whole result is spelled out:
 * the fold every reader shares (HTTP views, SDK, console), so a rule broken here shows a person a
 * wrong transcript everywhere at once.
 */

/** Numbers the events as the log does: seq from 1, `at` = 1000 × seq. */
function fold(events: readonly NewEvent[], state: TranscriptState = emptyTranscript()): TranscriptState {
  const first = state.lastSeq + 1;
  const stored = events.map((e, i) => ({ seq: first + i, at: (first + i) * 1000, ...e }) as SessionEvent);
  return applyEvents(state, stored);
}

const start = (turnId: string, trigger: "prompt" | "queue" | "server" = "prompt"): NewEvent => ({
  type: "turn/start",
  data: { turnId, trigger },
});
const end = (
  turnId: string,
  state: "completed" | "failed" | "cancelled" | "interrupted" = "completed",
  error?: string,
): NewEvent => ({
  type: "turn/end",
  data: error === undefined ? { turnId, state } : { turnId, state, error },
});
const user = (messageId: string, text: string, extra: Record<string, unknown> = {}): NewEvent =>
  ({
    type: "user/message",
    data: { messageId, source: "user", text, attachments: [], meta: {}, ...extra },
  }) as NewEvent;
const delta = (turnId: string, text: string): NewEvent => ({
  type: "assistant/delta",
  data: { turnId, text },
});
const reasoning = (turnId: string, text: string): NewEvent => ({
  type: "reasoning/delta",
  data: { turnId, text },
});
const call = (turnId: string, toolCallId: string): NewEvent => ({
  type: "tool/call",
  data: { turnId, toolCallId, name: "search", args: { q: toolCallId } },
});
const result = (turnId: string, toolCallId: string): NewEvent => ({
  type: "tool/result",
  data: { turnId, toolCallId, ok: true, result: `r-${toolCallId}`, durationMs: 7 },
});
const ask = (turnId: string, interactionId: string, extra: Record<string, unknown> = {}): NewEvent =>
  ({
    type: "interaction/requested",
    data: { turnId, interactionId, kind: "question", ...extra },
  }) as NewEvent;
const answer = (interactionId: string, text = "yes"): NewEvent => ({
  type: "interaction/resolved",
  data: { interactionId, resolution: { answer: text } },
});

const assistants = (s: TranscriptState) => s.messages.filter((m) => m.role === "assistant");

describe("the session's header", () => {
  it("takes what `session/created` says, keeps what it leaves out, and follows renames and model changes", () => {
    const created = fold([
      {
        type: "session/created",
        data: { title: "Plan", model: "m1", origin: "cli", forkOf: { sessionId: "s0", seq: 4 } },
      },
    ]);
    expect(created).toMatchObject({
      title: "Plan",
      model: "m1",
      origin: "cli",
      createdAt: 1000,
      forkOf: { sessionId: "s0", seq: 4 },
    });
    const bare = fold([{ type: "session/created", data: {} } as NewEvent], {
      ...emptyTranscript(),
      model: "kept",
    });
    expect(bare).toMatchObject({ title: "", model: "kept", origin: null, forkOf: null });
    const later = fold(
      [
        { type: "session/renamed", data: { title: "Renamed" } },
        { type: "session/model", data: { model: "m2" } },
      ],
      created,
    );
    expect(later).toMatchObject({ title: "Renamed", model: "m2", lastSeq: 3 });
  });

  it("skips an event type it does not know (a newer host's), counting its seq", () => {
    const before = fold([start("t")]);
    const after = fold([{ type: "x/newer", data: {} } as unknown as NewEvent, delta("t", "a")], before);
    expect(after.lastSeq).toBe(3);
    expect(after.messages.map((m) => m.text)).toEqual(["a"]);
  });
});

describe("turns", () => {
  it("none yet: a new session is not streaming, and no message takes output", () => {
    // `streaming` is the view's `is_streaming` and the console's cancel button
    expect(fold([{ type: "session/created", data: { title: "new" } }])).toMatchObject({
      turns: [],
      openTurnId: null,
      streaming: false,
      tail: -1,
    });
  });

  it("open working, streaming, with no message taking output until there is output", () => {
    const s = fold([user("u1", "hi"), start("t", "queue")]);
    expect(s.turns).toEqual([
      {
        turnId: "t",
        trigger: "queue",
        state: "working",
        startedAt: 2000,
        endedAt: null,
        startSeq: 2,
        interrupted: false,
      },
    ]);
    expect(s).toMatchObject({ openTurnId: "t", streaming: true, tail: -1 });
  });

  it("end with their state, an error only when given, and `interrupted` only when stopped early", () => {
    const s = fold([
      start("a"),
      end("a", "failed", "model down"),
      start("b"),
      end("b", "cancelled"),
      start("c"),
      end("c", "interrupted"),
      start("d"),
      end("d"),
    ]);
    expect(
      s.turns.map(({ turnId, state, endedAt, interrupted, error }) => ({
        turnId,
        state,
        endedAt,
        interrupted,
        error,
      })),
    ).toEqual([
      { turnId: "a", state: "failed", endedAt: 2000, interrupted: false, error: "model down" },
      { turnId: "b", state: "cancelled", endedAt: 4000, interrupted: true, error: undefined },
      { turnId: "c", state: "interrupted", endedAt: 6000, interrupted: true, error: undefined },
      { turnId: "d", state: "completed", endedAt: 8000, interrupted: false, error: undefined },
    ]);
    expect(Object.hasOwn(s.turns[3]!, "error")).toBe(false);
    expect(s).toMatchObject({ openTurnId: null, streaming: false, tail: -1 });
  });

  it("an end names its own turn: another open turn stays open, and an unknown one changes no turn", () => {
    const s = fold([start("a"), start("b"), end("a"), end("nobody")]);
    expect(s.turns.map((t) => [t.turnId, t.state])).toEqual([
      ["a", "completed"],
      ["b", "working"],
    ]);
    expect(Object.keys(s.turns)).toEqual(["0", "1"]);
    expect(s).toMatchObject({ openTurnId: "b", streaming: true });
  });

  it("after an end, the next turn's output starts a message of its own", () => {
    const s = fold([start("a"), delta("a", "one"), end("a"), start("b"), delta("b", "two")]);
    expect(assistants(s).map((m) => [m.id, m.text])).toEqual([
      ["a.0", "one"],
      ["b.0", "two"],
    ]);
  });
});

describe("messages", () => {
  it("a user message is not an interjection unless it says so", () => {
    const s = fold([user("u1", "hi"), start("t"), user("u2", "also", { interjection: true })]);
    expect(s.messages.map((m) => (m.role === "user" ? m.interjection : null))).toEqual([false, true]);
  });

  it("text and reasoning gather on the turn's one message; an empty delta makes none", () => {
    const s = fold([
      start("t"),
      delta("t", ""),
      reasoning("t", "think "),
      reasoning("t", "more"),
      delta("t", "a"),
      delta("t", "b"),
    ]);
    expect(s.messages).toHaveLength(1);
    expect(s.messages[0]).toMatchObject({
      role: "assistant",
      index: 1,
      id: "t.0",
      seq: 3,
      at: 3000,
      updatedAt: 6000,
      turnId: "t",
      text: "ab",
      reasoning: "think more",
      segments: [{ kind: "text", text: "ab" }],
    });
    expect(fold([start("t"), delta("t", "")]).messages).toEqual([]);
    expect(fold([start("t"), delta("t", "x")]).messages[0]).toMatchObject({ reasoning: "" });
  });

  it("another turn's output does not join the message taking this turn's", () => {
    const s = fold([start("a"), delta("a", "one"), delta("b", "two")]);
    expect(assistants(s).map((m) => [m.turnId, m.text])).toEqual([
      ["a", "one"],
      ["b", "two"],
    ]);
  });

  it("output after an interjection is a new message of the turn, numbered after the turn's others", () => {
    // the turn's first message is the transcript's first (a turn no prompt started)
    const s = fold([
      start("t", "server"),
      delta("t", "a"),
      user("u", "wait", { interjection: true }),
      delta("t", "b"),
    ]);
    expect(s.messages.map((m) => [m.role, m.id, m.text])).toEqual([
      ["assistant", "t.0", "a"],
      ["user", "u", "wait"],
      ["assistant", "t.1", "b"],
    ]);
  });
});

describe("tool calls", () => {
  it("a result lands on its own call, in the turn's earlier message too, never in another turn's", () => {
    const s = fold([
      start("a"),
      call("a", "x"),
      end("a"),
      start("b"),
      call("b", "y"),
      call("b", "z"),
      user("u", "and", { interjection: true }),
      delta("b", "more"),
      result("b", "z"),
      // x is turn a's: a result that names turn b does not reach it
      result("b", "x"),
    ]);
    const [a, b1, b2] = assistants(s);
    expect(a!.toolCalls).toEqual([
      { id: "x", name: "search", args: { q: "x" }, ok: null, result: null, duration_ms: null },
    ]);
    expect(b1!.toolCalls).toEqual([
      { id: "y", name: "search", args: { q: "y" }, ok: null, result: null, duration_ms: null },
      { id: "z", name: "search", args: { q: "z" }, ok: true, result: "r-z", duration_ms: 7 },
    ]);
    expect(b1!.segments).toEqual([
      { kind: "tool", toolId: "y" },
      { kind: "tool", toolId: "z" },
    ]);
    expect(b2!.toolCalls).toEqual([]);
  });
});

describe("interactions", () => {
  it("a request is pending with only the fields it carries, and a block in its place", () => {
    const s = fold([
      start("t"),
      ask("t", "i1"),
      ask("t", "i2", { kind: "approval", action: "delete", question: "sure?", options: ["y", "n"] }),
    ]);
    expect(s.pending).toStrictEqual([
      { interactionId: "i1", turnId: "t", kind: "question", requestedAt: 2000, seq: 2 },
      {
        interactionId: "i2",
        turnId: "t",
        kind: "approval",
        requestedAt: 3000,
        seq: 3,
        action: "delete",
        question: "sure?",
        options: ["y", "n"],
      },
    ]);
    expect(assistants(s)[0]!.segments).toStrictEqual([
      {
        kind: "block",
        block: { type: "interaction", interactionId: "i1", kind: "question", resolution: null },
      },
      {
        kind: "block",
        block: {
          type: "interaction",
          interactionId: "i2",
          kind: "approval",
          resolution: null,
          action: "delete",
          question: "sure?",
          options: ["y", "n"],
        },
      },
    ]);
    expect(s.turns[0]!.state).toBe("input-required");
  });

  it("an answer resolves its own block; the turn works again once nothing of it is pending", () => {
    const asked = fold([
      start("t"),
      ask("t", "i1"),
      delta("t", "x"),
      user("u", "hm", { interjection: true }),
      delta("t", "y"),
      ask("t", "i2"),
    ]);
    const first = fold([answer("i1", "one")], asked);
    expect(first.pending.map((p) => p.interactionId)).toEqual(["i2"]);
    expect(first.turns[0]!.state).toBe("input-required");
    const blocks = (s: TranscriptState) =>
      assistants(s).flatMap((m) =>
        m.segments.flatMap((g) => (g.kind === "block" ? [[g.block.interactionId, g.block.resolution]] : [])),
      );
    expect(blocks(first)).toEqual([
      ["i1", { answer: "one" }],
      ["i2", null],
    ]);
    const both = fold([answer("i2", "two")], first);
    expect(both.pending).toEqual([]);
    expect(both.turns[0]!.state).toBe("working");
    expect(blocks(both)).toEqual([
      ["i1", { answer: "one" }],
      ["i2", { answer: "two" }],
    ]);
  });

  it("another turn's pending request keeps that turn waiting when this one's is answered", () => {
    const s = fold([start("a"), ask("a", "ia"), start("b"), ask("b", "ib"), answer("ib")]);
    expect(s.pending.map((p) => p.interactionId)).toEqual(["ia"]);
    expect(s.turns.map((t) => t.state)).toEqual(["input-required", "working"]);
  });

  it("an answer to nothing pending changes nothing", () => {
    const asked = fold([start("t"), ask("t", "i1"), ask("t", "i2")]);
    const s = fold([answer("nope")], asked);
    expect(s.pending).toEqual(asked.pending);
    expect(s.messages).toEqual(asked.messages);
  });

  it("a turn's end withdraws its pending requests, not another turn's, and keeps its end state", () => {
    const s = fold([
      start("a"),
      ask("a", "ia"),
      start("b"),
      ask("b", "ib"),
      end("b", "cancelled"),
      ask("b", "late"),
    ]);
    expect(s.pending.map((p) => p.interactionId)).toEqual(["ia", "late"]);
    expect(s.turns.map((t) => t.state)).toEqual(["input-required", "cancelled"]);
  });

  it("a request of a turn that never started is shown, and changes no turn", () => {
    const s = fold([start("a"), ask("ghost", "i1")]);
    expect(s.pending.map((p) => p.turnId)).toEqual(["ghost"]);
    expect(s.turns.map((t) => [t.turnId, t.state])).toEqual([["a", "working"]]);
  });
});

describe("copy on write", () => {
  it("never changes the state it was given, and shares the messages a batch did not touch", () => {
    const before = fold([
      start("a"),
      delta("a", "one"),
      call("a", "x"),
      end("a"),
      start("b"),
      delta("b", "two"),
    ]);
    const snapshot = structuredClone(before);
    const after = fold([delta("b", " more"), call("b", "y")], before);
    expect(before).toEqual(snapshot);
    expect(after.messages[0]).toBe(before.messages[0]);
    expect(after.messages[1]).not.toBe(before.messages[1]);
    expect(assistants(after).map((m) => m.text)).toEqual(["one", "two more"]);
  });
});
