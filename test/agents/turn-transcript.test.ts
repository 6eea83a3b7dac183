import { describe, expect, test } from "vitest";
import type { SessionEvent } from "../../protocol/index.js";
import { TurnTranscript } from "../../src/agents/turn-transcript.js";

let seq = 0;
const event = (type: string, data: Record<string, unknown>): SessionEvent =>
  ({ seq: ++seq, at: seq, type, data }) as SessionEvent;

const call = (toolCallId: string) =>
  event("tool/call", { turnId: "t2", toolCallId, name: `tool_${toolCallId}`, args: { id: toolCallId } });
const result = (toolCallId: string, fields: Record<string, unknown>) =>
  event("tool/result", { turnId: "t2", toolCallId, durationMs: 1, ...fields });

/** An earlier turn, then one whose calls ended every way a log can hold, one call still open. */
const log = [
  event("turn/start", { turnId: "t1" }),
  event("user/message", { turnId: "t1", text: "before" }),
  event("assistant/delta", { turnId: "t1", text: "earlier answer" }),
  event("turn/end", { turnId: "t1", state: "completed" }),
  event("turn/start", { turnId: "t2" }),
  event("user/message", { turnId: "t2", text: "go" }),
  ...["ok", "empty", "denied", "odd", "object", "text", "none", "said", "open"].map(call),
  // a result whose call the log does not hold comes first; it goes after the step's own
  result("stray", { ok: true, result: 0 }),
  result("ok", { ok: true, result: { n: 1 } }),
  result("empty", { ok: true }),
  result("denied", { ok: false, result: { denied: true } }),
  result("odd", { ok: false, result: { denied: "yes", reason: "r" } }),
  result("object", { ok: false, result: { error: { code: 7 } } }),
  result("text", { ok: false, result: "boom" }),
  result("none", { ok: false }),
  result("said", { ok: false, result: { error: "it broke" } }),
];

describe("a turn rebuilt from the log", () => {
  test("every outcome a tool/result can record reads back as the model was told it; open calls are pending", () => {
    const { transcript, pending } = TurnTranscript.fromLog(log, "t2");
    expect(pending).toEqual([{ toolCallId: "open", toolName: "tool_open", input: { id: "open" } }]);
    const messages = transcript.messages();
    expect(messages.slice(0, 3)).toEqual([
      { role: "user", content: "before" },
      { role: "assistant", content: "earlier answer" },
      { role: "user", content: "go" },
    ]);
    expect(messages[3]).toMatchObject({ role: "assistant" });
    expect((messages[3]!.content as { toolCallId: string }[]).map((p) => p.toolCallId)).toEqual([
      "ok",
      "empty",
      "denied",
      "odd",
      "object",
      "text",
      "none",
      "said",
      "open",
    ]);
    const tool = (id: string) => (id === "stray" ? "unknown" : `tool_${id}`);
    const part = (toolCallId: string, output: unknown) => ({
      type: "tool-result",
      toolCallId,
      toolName: tool(toolCallId),
      output,
    });
    expect(messages.slice(4)).toEqual([
      {
        role: "tool",
        content: [
          part("ok", { type: "json", value: { n: 1 } }),
          part("empty", { type: "json", value: null }),
          part("denied", { type: "execution-denied", reason: "denied" }),
          part("odd", { type: "error-text", value: '{"denied":"yes","reason":"r"}' }),
          part("object", { type: "error-text", value: '{"error":{"code":7}}' }),
          part("text", { type: "error-text", value: '"boom"' }),
          part("none", { type: "error-text", value: "null" }),
          part("said", { type: "error-text", value: "it broke" }),
          part("stray", { type: "json", value: 0 }),
        ],
      },
    ]);
  });

  test("a turn the log does not hold: the earlier turns only, nothing pending", () => {
    const { transcript, pending } = TurnTranscript.fromLog(log.slice(0, 4), "t2");
    expect(pending).toEqual([]);
    expect(transcript.messages()).toEqual([
      { role: "user", content: "before" },
      { role: "assistant", content: "earlier answer" },
    ]);
  });

  test("a turn begins at its own turn/start: without it, the turn's other events are not resumed", () => {
    const withoutStart = log.filter((e) => !(e.type === "turn/start" && e.data.turnId === "t2"));
    const { transcript, pending } = TurnTranscript.fromLog(withoutStart, "t2");
    expect(pending).toEqual([]);
    // only plain-text history: no step of the turn, no tool call or result
    expect(transcript.messages().every((m) => typeof m.content === "string")).toBe(true);
  });

  test("steps that follow tool results directly each begin their own assistant message", () => {
    const t = "t3";
    const steps = [
      event("turn/start", { turnId: t }),
      event("user/message", { turnId: t, text: "go" }),
      event("tool/call", { turnId: t, toolCallId: "a", name: "f", args: {} }),
      event("tool/result", { turnId: t, toolCallId: "a", ok: true, result: 1, durationMs: 1 }),
      // the next step calls at once, without text
      event("tool/call", { turnId: t, toolCallId: "b", name: "f", args: {} }),
      event("tool/result", { turnId: t, toolCallId: "b", ok: true, result: 2, durationMs: 1 }),
      // the one after speaks first, in two pieces
      event("assistant/delta", { turnId: t, text: "so " }),
      event("assistant/delta", { turnId: t, text: "far" }),
      event("tool/call", { turnId: t, toolCallId: "c", name: "f", args: {} }),
    ];
    const { transcript, pending } = TurnTranscript.fromLog(steps, t);
    expect(pending.map((c) => c.toolCallId)).toEqual(["c"]);
    const callOf = (toolCallId: string) => ({ type: "tool-call", toolCallId, toolName: "f", input: {} });
    const resultOf = (toolCallId: string, value: number) => ({
      role: "tool",
      content: [{ type: "tool-result", toolCallId, toolName: "f", output: { type: "json", value } }],
    });
    expect(transcript.messages()).toEqual([
      { role: "user", content: "go" },
      { role: "assistant", content: [callOf("a")] },
      resultOf("a", 1),
      { role: "assistant", content: [callOf("b")] },
      resultOf("b", 2),
      { role: "assistant", content: [{ type: "text", text: "so far" }, callOf("c")] },
    ]);
  });
});

describe("a transcript built live", () => {
  test("starts empty; a step without tool calls is one assistant message and no tool message", () => {
    const transcript = new TurnTranscript();
    transcript.addUser("a");
    transcript.addText("b");
    transcript.addText("c");
    transcript.addUser("d");
    expect(transcript.messages()).toEqual([
      { role: "user", content: "a" },
      { role: "assistant", content: [{ type: "text", text: "bc" }] },
      { role: "user", content: "d" },
    ]);
  });
});
