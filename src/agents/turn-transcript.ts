import type { JSONValue, ModelMessage, ToolCallPart, ToolResultPart } from "ai";
import type { SessionEvent } from "../../protocol/index.js";
import { chatHistory } from "./chat-history.js";

/** A tool call as the model asked for it; `invalid` says why it cannot run (unknown tool, bad input). */
export interface ModelToolCall {
  toolCallId: string;
  toolName: string;
  input: unknown;
  invalid?: string;
}

/** How a tool call ended, as recorded in its `tool/result`. */
export type ToolOutcome =
  | { kind: "ok"; value: JSONValue }
  | { kind: "error"; message: string }
  | { kind: "denied"; reason: string };

/**
 * The conversation as the model sees it: earlier turns as plain text, then this turn with its
 * tool calls and results in model messages. Built live as the turn runs, or from the log when a
 * parked turn continues after a restart, through the same steps, so both send the same messages.
 */
export class TurnTranscript {
  readonly #messages: ModelMessage[];
  #text = "";
  #calls: ToolCallPart[] = [];
  #results: ToolResultPart[] = [];
  readonly #names = new Map<string, string>();

  constructor(earlier: ModelMessage[] = []) {
    this.#messages = [...earlier];
  }

  /** Earlier turns from the log, then this turn's events: what a continued turn resumes from. */
  static fromLog(
    events: SessionEvent[],
    turnId: string,
    maxHistoryChars?: number,
  ): { transcript: TurnTranscript; pending: ModelToolCall[] } {
    const transcript = new TurnTranscript(chatHistory(events, turnId, maxHistoryChars));
    const start = events.findIndex((e) => e.type === "turn/start" && e.data.turnId === turnId);
    const open = new Map<string, ModelToolCall>();
    for (const event of start < 0 ? [] : events.slice(start + 1)) {
      if (event.type === "user/message" && event.data.text) transcript.addUser(event.data.text);
      else if (event.type === "assistant/delta") transcript.addText(event.data.text);
      else if (event.type === "tool/call") {
        const call = { toolCallId: event.data.toolCallId, toolName: event.data.name, input: event.data.args };
        transcript.addCall(call);
        open.set(call.toolCallId, call);
      } else if (event.type === "tool/result") {
        transcript.addResult(event.data.toolCallId, outcomeOf(event.data.ok, event.data.result));
        open.delete(event.data.toolCallId);
      }
    }
    return { transcript, pending: [...open.values()] };
  }

  addUser(text: string): void {
    this.#flush();
    this.#messages.push({ role: "user", content: text });
  }

  addText(text: string): void {
    // text after tool results is the model's next step
    if (this.#results.length > 0) this.#flush();
    this.#text += text;
  }

  addCall(call: ModelToolCall): void {
    if (this.#results.length > 0) this.#flush();
    this.#names.set(call.toolCallId, call.toolName);
    this.#calls.push({
      type: "tool-call",
      toolCallId: call.toolCallId,
      toolName: call.toolName,
      input: call.input,
    });
  }

  addResult(toolCallId: string, outcome: ToolOutcome): void {
    this.#results.push({
      type: "tool-result",
      toolCallId,
      toolName: this.#names.get(toolCallId) ?? "unknown",
      output:
        outcome.kind === "ok"
          ? { type: "json", value: outcome.value }
          : outcome.kind === "denied"
            ? { type: "execution-denied", reason: outcome.reason }
            : { type: "error-text", value: outcome.message },
    });
  }

  messages(): ModelMessage[] {
    this.#flush();
    return [...this.#messages];
  }

  #flush(): void {
    if (this.#text || this.#calls.length > 0) {
      const text = this.#text ? [{ type: "text" as const, text: this.#text }] : [];
      this.#messages.push({ role: "assistant", content: [...text, ...this.#calls] });
    }
    if (this.#results.length > 0) {
      // in call order, as a live step adds them; the log holds them in the order the tools finished
      const order = new Map(this.#calls.map((call, i) => [call.toolCallId, i]));
      const rank = (result: ToolResultPart) => order.get(result.toolCallId) ?? this.#calls.length;
      this.#messages.push({ role: "tool", content: this.#results.sort((a, b) => rank(a) - rank(b)) });
    }
    this.#text = "";
    this.#calls = [];
    this.#results = [];
  }
}

/** The `tool/result` event's data for an outcome: what the log and the console show. */
export function recordedResult(outcome: ToolOutcome): { ok: boolean; result: unknown } {
  if (outcome.kind === "ok") return { ok: true, result: outcome.value };
  if (outcome.kind === "denied") return { ok: false, result: { denied: true, reason: outcome.reason } };
  return { ok: false, result: { error: outcome.message } };
}

/** The inverse of {@link recordedResult}, for a turn rebuilt from the log. */
function outcomeOf(ok: boolean, result: unknown): ToolOutcome {
  if (ok) return { kind: "ok", value: (result ?? null) as JSONValue };
  const r = (typeof result === "object" && result !== null ? result : {}) as Record<string, unknown>;
  if (r.denied === true) return { kind: "denied", reason: String(r.reason ?? "denied") };
  return { kind: "error", message: typeof r.error === "string" ? r.error : JSON.stringify(result ?? null) };
}
