import type { QueueItem } from "../../../protocol/index.js";
import type {
  PendingInteraction,
  TranscriptMessage,
  TranscriptState,
  TranscriptTurn,
  UserTranscriptMessage,
} from "../../../protocol/transcript.js";
import { interactionView, loggedInteraction } from "./session-view.js";

/*
 * A2A Task JSON (protocol 0.3, the lowercase-state JSON the chat routes speak). `@a2a-js/sdk` 1.x
 * exports only its v1 protobuf-shaped types (enum states, `$case` parts), not this JSON shape, so
 * the shape is declared here field for field.
 */
export type A2ATaskState = "submitted" | "working" | "input-required" | "completed" | "failed" | "canceled";
export type A2APart =
  | { kind: "text"; text: string }
  | { kind: "file"; file: { name: string; mimeType: string; uri: string } }
  | { kind: "data"; data: Record<string, unknown> };
export interface A2AMessage {
  kind: "message";
  messageId: string;
  role: "user" | "agent";
  parts: A2APart[];
  contextId: string;
  taskId: string;
  metadata?: Record<string, unknown>;
}
export interface A2AArtifact {
  artifactId: string;
  name: string;
  parts: A2APart[];
}
export interface A2ATask {
  kind: "task";
  id: string;
  contextId: string;
  status: { state: A2ATaskState; timestamp: string; message?: A2AMessage };
  artifacts: A2AArtifact[];
  history: A2AMessage[];
  metadata: Record<string, unknown>;
}

/** One row of `GET /api/chat/sessions/{id}/turns`: an A2A Task plus the flat fields scripts read. */
export interface TurnRow extends A2ATask {
  task_id: string;
  /** Same as `status.state`. */
  state: A2ATaskState;
  /** ISO 8601, like A2A's `status.timestamp`. */
  last_updated: string;
  /** The answer text: the turn's assistant messages joined by a blank line. */
  text: string;
}

/**
 * `interrupted` (the host stopped while the turn ran) maps to `failed`: the turn did not finish
 * and nobody asked it to stop, which is what `canceled` means in A2A. `metadata.interrupted` is
 * true for both: the turn was stopped early.
 */
export function a2aState(state: TranscriptTurn["state"]): A2ATaskState {
  switch (state) {
    case "cancelled":
      return "canceled";
    case "interrupted":
      return "failed";
    default:
      return state;
  }
}

/** Newest first: queued prompts (`submitted`), then turns from the newest, `limit` rows in all. */
export function turnRows(
  sessionId: string,
  transcript: TranscriptState,
  queue: QueueItem[],
  limit: number,
): TurnRow[] {
  const rows: TurnRow[] = [];
  for (let i = queue.length - 1; i >= 0 && rows.length < limit; i--)
    rows.push(queuedRow(sessionId, queue[i]!));
  const byTurn = new Map<string, TranscriptMessage[]>();
  for (const m of transcript.messages) {
    if (m.turnId === null) continue;
    const list = byTurn.get(m.turnId);
    if (list) list.push(m);
    else byTurn.set(m.turnId, [m]);
  }
  for (let i = transcript.turns.length - 1; i >= 0 && rows.length < limit; i--) {
    const turn = transcript.turns[i]!;
    const row = turnRow(sessionId, turn, byTurn.get(turn.turnId) ?? []);
    const waitingOn = transcript.pending.filter((p) => p.turnId === turn.turnId);
    if (waitingOn.length > 0) row.status.message = waitingMessage(sessionId, turn.turnId, waitingOn);
    rows.push(row);
  }
  return rows;
}

/**
 * What an `input-required` task waits for, as A2A says it (`status.message`): each pending
 * question in words, and as data spelled as the session view's `pending_questions`, whose
 * `interaction_id` a client answers at `POST /v1/interactions/{id}/answer`.
 */
function waitingMessage(sessionId: string, turnId: string, pending: PendingInteraction[]): A2AMessage {
  const parts: A2APart[] = [];
  for (const p of pending) {
    const options = p.options?.length ? ` (${p.options.join(" / ")})` : "";
    const text =
      p.kind === "approval" ? `Approval needed: ${p.action ?? ""}` : `${p.question ?? ""}${options}`;
    parts.push({ kind: "text", text });
    parts.push({ kind: "data", data: { ...interactionView(loggedInteraction(sessionId, p)) } });
  }
  return {
    kind: "message",
    messageId: `${turnId}.input-required`,
    role: "agent",
    parts,
    contextId: sessionId,
    taskId: turnId,
  };
}

function turnRow(sessionId: string, turn: TranscriptTurn, messages: TranscriptMessage[]): TurnRow {
  const history: A2AMessage[] = [];
  const answers: string[] = [];
  let updated = turn.endedAt ?? turn.startedAt;
  for (const m of messages) {
    if (m.role === "user") {
      if (!m.hidden) history.push(userMessage(sessionId, turn.turnId, m));
      continue;
    }
    updated = Math.max(updated, m.updatedAt);
    if (m.text.length > 0) answers.push(m.text);
    history.push({
      kind: "message",
      messageId: m.id,
      role: "agent",
      parts: [{ kind: "text", text: m.text }],
      contextId: sessionId,
      taskId: turn.turnId,
    });
  }
  const state = a2aState(turn.state);
  const timestamp = new Date(updated).toISOString();
  const metadata: Record<string, unknown> = { trigger: turn.trigger, sessionmux_state: turn.state };
  if (turn.interrupted) metadata.interrupted = true;
  if (turn.error !== undefined) metadata.error = turn.error;
  return {
    kind: "task",
    id: turn.turnId,
    contextId: sessionId,
    task_id: turn.turnId,
    state,
    last_updated: timestamp,
    text: answers.join("\n\n"),
    status: { state, timestamp },
    artifacts:
      answers.length === 0
        ? []
        : [
            {
              artifactId: `${turn.turnId}-answer`,
              name: "answer",
              parts: answers.map((text) => ({ kind: "text", text })),
            },
          ],
    history,
    metadata,
  };
}

function userMessage(sessionId: string, taskId: string, m: UserTranscriptMessage): A2AMessage {
  const parts: A2APart[] = [{ kind: "text", text: m.text }];
  for (const a of m.attachments) {
    const uri =
      a.attachmentId !== undefined ? `/v1/attachments/${encodeURIComponent(a.attachmentId)}` : a.url;
    if (uri !== undefined) parts.push({ kind: "file", file: { name: a.name, mimeType: a.type, uri } });
  }
  const message: A2AMessage = {
    kind: "message",
    messageId: m.id,
    role: "user",
    parts,
    contextId: sessionId,
    taskId,
  };
  if (m.interjection) message.metadata = { interjection: true };
  return message;
}

function queuedRow(sessionId: string, item: QueueItem): TurnRow {
  const timestamp = new Date(item.queuedAt).toISOString();
  return {
    kind: "task",
    id: item.itemId,
    contextId: sessionId,
    task_id: item.itemId,
    state: "submitted",
    last_updated: timestamp,
    text: "",
    status: { state: "submitted", timestamp },
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
  };
}
