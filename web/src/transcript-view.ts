import type {
  AssistantTranscriptMessage,
  InteractionBlock,
  ToolCall,
  TranscriptState,
  TranscriptTurn,
  UserTranscriptMessage,
} from "../../protocol/transcript.js";
import { h, KeyedList } from "./element-builder.js";

/** One row of the transcript as drawn: a message, or the mark of a turn that did not complete. */
type Row =
  | { kind: "user"; key: string; msg: UserTranscriptMessage }
  | { kind: "assistant"; key: string; msg: AssistantTranscriptMessage; streaming: boolean; pending: string }
  | { kind: "turn-flag"; key: string; turn: TranscriptTurn };

const sameRow = (a: Row, b: Row): boolean => {
  if (a.kind === "assistant" && b.kind === "assistant")
    return a.msg === b.msg && a.streaming === b.streaming && a.pending === b.pending;
  if (a.kind === "turn-flag" && b.kind === "turn-flag") return a.turn === b.turn;
  return a.kind === b.kind && (a as { msg?: unknown }).msg === (b as { msg?: unknown }).msg;
};

function rows(state: TranscriptState): Row[] {
  const pendingIds = new Set(state.pending.map((p) => p.interactionId));
  const flagged = new Map(
    state.turns
      .filter((t) => t.state === "interrupted" || t.state === "failed" || t.state === "cancelled")
      .map((t) => [t.turnId, t]),
  );
  const lastIndexOfTurn = new Map<string, number>();
  state.messages.forEach((m, i) => {
    if (m.turnId) lastIndexOfTurn.set(m.turnId, i);
  });
  const out: Row[] = [];
  state.messages.forEach((m, i) => {
    if (m.role === "user") {
      if (!m.hidden) out.push({ kind: "user", key: `u:${m.id}`, msg: m });
    } else {
      const streaming = state.streaming && i === state.tail;
      const pending = m.segments
        .filter((s) => s.kind === "block" && pendingIds.has(s.block.interactionId))
        .map((s) => (s.kind === "block" ? s.block.interactionId : ""))
        .join(",");
      out.push({ kind: "assistant", key: `a:${m.id}`, msg: m, streaming, pending });
    }
    const turn = m.turnId ? flagged.get(m.turnId) : undefined;
    if (turn && lastIndexOfTurn.get(turn.turnId) === i)
      out.push({ kind: "turn-flag", key: `f:${turn.turnId}`, turn });
  });
  return out;
}

const formatJson = (value: unknown): string => {
  if (typeof value === "string") return value;
  try {
    return JSON.stringify(value, null, 2) ?? String(value);
  } catch {
    return String(value);
  }
};

function toolElement(call: ToolCall | undefined, toolId: string): HTMLElement {
  if (!call) return h("div", { class: "tool" });
  const status = call.ok === null ? "running…" : call.ok ? `ok · ${call.duration_ms ?? 0} ms` : "failed";
  return h(
    "details",
    { class: "tool", "data-testid": "tool-call", "data-tool-id": toolId },
    h(
      "summary",
      {},
      h("span", {}, "Tool"),
      h("span", { class: "tool-name" }, call.name),
      h("span", { class: "tool-status", "data-ok": call.ok === null ? undefined : String(call.ok) }, status),
    ),
    h("pre", {}, `args: ${formatJson(call.args)}`),
    call.ok === null ? null : h("pre", { "data-testid": "tool-result" }, formatJson(call.result)),
  );
}

function resolutionText(block: InteractionBlock): string {
  const r = block.resolution;
  if (!r) return "No answer: the turn ended";
  return "outcome" in r ? (r.outcome === "approve" ? "Approved" : "Denied") : `Answered: ${r.answer}`;
}

function cardElement(block: InteractionBlock, actionable: boolean): HTMLElement {
  const isApproval = block.kind === "approval";
  const title = isApproval ? "Approval needed" : "Question";
  const body = isApproval ? (block.action ?? "") : (block.question ?? "");
  if (!actionable) {
    return h(
      "div",
      {
        class: "card resolved",
        "data-testid": "interaction-resolved",
        "data-interaction-id": block.interactionId,
      },
      h("div", { class: "card-title" }, `${title}: ${body}`),
      h("div", {}, resolutionText(block)),
    );
  }
  const id = block.interactionId;
  const actions = isApproval
    ? [
        h(
          "button",
          { class: "primary", "data-action": "approve", "data-interaction-id": id, "data-testid": "approve" },
          "Approve",
        ),
        h("button", { "data-action": "deny", "data-interaction-id": id, "data-testid": "deny" }, "Deny"),
      ]
    : [
        ...(block.options ?? []).map((o) =>
          h("button", { "data-action": "answer-option", "data-interaction-id": id, "data-answer": o }, o),
        ),
        h("input", { type: "text", placeholder: "Your answer", "data-testid": "answer-input" }),
        h(
          "button",
          { class: "primary", "data-action": "answer", "data-interaction-id": id, "data-testid": "answer" },
          "Answer",
        ),
      ];
  return h(
    "div",
    { class: "card", "data-testid": "interaction-card", "data-interaction-id": id, "data-kind": block.kind },
    h("div", { class: "card-title" }, title),
    h("div", { class: "card-body" }, body),
    h("div", { class: "card-actions" }, ...actions),
  );
}

function userElement(m: UserTranscriptMessage): HTMLElement {
  const role = m.interjection ? "Interjection" : m.source === "server" ? "Server" : "You";
  const names = m.attachments.map((a) => `📎 ${a.name}`).join("  ");
  return h(
    "div",
    {
      class: `message user${m.interjection ? " interjection" : ""}`,
      "data-testid": "user-message",
      "data-seq": m.seq,
      "data-interjection": m.interjection ? "true" : undefined,
    },
    h("span", { class: "role" }, role),
    h("div", { class: "bubble" }, m.text, names ? `\n${names}` : null),
  );
}

function assistantElement(
  m: AssistantTranscriptMessage,
  streaming: boolean,
  pending: Set<string>,
): HTMLElement {
  const el = h("div", {
    class: "message assistant",
    "data-testid": "assistant-message",
    "data-streaming": streaming ? "true" : undefined,
  });
  el.append(h("span", { class: "role" }, "Agent"));
  const lastText = m.segments.reduce((last, s, i) => (s.kind === "text" ? i : last), -1);
  m.segments.forEach((s, i) => {
    if (s.kind === "text") {
      const caret = streaming && i === lastText && i === m.segments.length - 1;
      el.append(
        h(
          "div",
          { class: `bubble${caret ? " streaming-caret" : ""}`, "data-testid": "assistant-text" },
          s.text,
        ),
      );
    } else if (s.kind === "tool") {
      el.append(
        toolElement(
          m.toolCalls.find((c) => c.id === s.toolId),
          s.toolId,
        ),
      );
    } else {
      el.append(cardElement(s.block, s.block.resolution === null && pending.has(s.block.interactionId)));
    }
  });
  if (streaming && lastText !== m.segments.length - 1)
    el.append(h("div", { class: "bubble streaming-caret" }));
  return el;
}

function flagElement(turn: TranscriptTurn): HTMLElement {
  const text =
    turn.state === "interrupted"
      ? "Turn interrupted (the host stopped before it finished)"
      : turn.state === "cancelled"
        ? "Turn cancelled"
        : `Turn failed${turn.error ? `: ${turn.error}` : ""}`;
  return h(
    "div",
    { class: "message" },
    h(
      "div",
      { class: `turn-flag ${turn.state}`, "data-testid": "turn-flag", "data-state": turn.state },
      text,
    ),
  );
}

/** Draws a transcript into its scroll container, keeping the view pinned to the bottom while it grows. */
export class TranscriptView {
  private readonly list: KeyedList<Row>;

  constructor(private readonly container: HTMLElement) {
    this.list = new KeyedList<Row>(
      container,
      (r) => r.key,
      (r) => {
        if (r.kind === "user") return userElement(r.msg);
        if (r.kind === "turn-flag") return flagElement(r.turn);
        return assistantElement(r.msg, r.streaming, new Set(r.pending ? r.pending.split(",") : []));
      },
      sameRow,
    );
  }

  render(state: TranscriptState): void {
    const c = this.container;
    const atBottom = c.scrollHeight - c.scrollTop - c.clientHeight < 80;
    this.list.update(rows(state));
    if (atBottom) c.scrollTop = c.scrollHeight;
  }

  clear(): void {
    this.list.clear();
  }
}
