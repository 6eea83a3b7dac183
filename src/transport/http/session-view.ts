import type { AttachmentShell, Interaction, UserMessageMeta } from "../../../protocol/index.js";
import type {
  PendingInteraction,
  TranscriptMessage,
  TranscriptState,
  TranscriptTurn,
} from "../../../protocol/transcript.js";
import type { SessionSnapshot } from "./session-transcript.js";

export interface ViewMessage {
  /** 1-based position in the transcript of this epoch; stable while the log is not cleared. */
  id: number;
  /** The stored `messageId` of a user message; `<turnId>.<n>` for an assistant one. */
  message_id: string;
  role: "user" | "assistant";
  content: string;
  ts_ms: number;
  /** User rows only, lifted from `metadata.attachments`. */
  attachments?: AttachmentShell[];
  metadata: Record<string, unknown>;
}

/**
 * The control stream's `Interaction` in the view's spelling: every field, snake_case, epoch
 * milliseconds suffixed `_ms` (the rule the whole view follows), so one decoder reads both.
 */
export interface PendingQuestion {
  interaction_id: string;
  session_id: string;
  turn_id: string;
  kind: Interaction["kind"];
  requested_at_ms: number;
  action?: string;
  question?: string;
  options?: string[];
  tool_call_id?: string;
}

/** The body of `GET /v1/sessions/{id}`. */
export interface SessionView {
  id: string;
  title: string;
  origin: string | null;
  kind: "chat";
  created_at_ms: number;
  updated_at_ms: number;
  message_count: number;
  has_unseen_completion: boolean;
  completion_settled_at_ms: number | null;
  messages: ViewMessage[];
  is_streaming: boolean;
  pending_questions: PendingQuestion[];
  /** The log cursor the messages were rendered at: open `session.follow` with `afterSeq: seq, epoch`. */
  seq: number;
  epoch: string;
}

/** The serialized `messages` of a transcript state; the reducer keeps a state object as long as nothing changes. */
const messagesJson = new WeakMap<TranscriptState, { json: Buffer[]; count: number }>();

/**
 * JSON of the messages serialized between two turns of the event loop. A view holds up to the
 * transcript bound (32 MiB of event data), and its messages serialized in one go held the loop
 * for 230–550 ms on a 27 MB session; a slice takes a few milliseconds.
 */
const VIEW_SLICE_CHARS = 256 * 1024;

function viewMessages(t: TranscriptState): ViewMessage[] {
  const turns = turnsById(t);
  const messages: ViewMessage[] = [];
  for (const m of t.messages) {
    if (m.role === "user" && m.hidden) continue;
    messages.push(viewMessage(m, m.turnId === null ? undefined : turns.get(m.turnId)));
  }
  return messages;
}

function turnsById(t: TranscriptState): Map<string, TranscriptTurn> {
  const turns = new Map<string, TranscriptTurn>();
  for (const turn of t.turns) turns.set(turn.turnId, turn);
  return turns;
}

/**
 * `JSON.stringify(viewMessages(t))` as UTF-8 pieces, serialized a slice of `VIEW_SLICE_CHARS` at a
 * time with a turn of the event loop between slices. The state is never changed in place (the
 * reducer copies what it touches), so the messages read across turns are those of one state.
 */
async function messagesJsonOf(t: TranscriptState): Promise<{ json: Buffer[]; count: number }> {
  const turns = turnsById(t);
  const json: Buffer[] = [Buffer.from("[")];
  let slice: string[] = [];
  let sliceChars = 0;
  let count = 0;
  const flush = () => {
    json.push(Buffer.from(`${count > slice.length ? "," : ""}${slice.join(",")}`, "utf8"));
    slice = [];
    sliceChars = 0;
  };
  for (const m of t.messages) {
    if (m.role === "user" && m.hidden) continue;
    const text = JSON.stringify(viewMessage(m, m.turnId === null ? undefined : turns.get(m.turnId)));
    slice.push(text);
    sliceChars += text.length;
    count++;
    if (sliceChars >= VIEW_SLICE_CHARS) {
      flush();
      await new Promise((resolve) => setImmediate(resolve));
    }
  }
  if (slice.length > 0) flush();
  json.push(Buffer.from("]"));
  return { json, count };
}

/**
 * Builds the session view from a snapshot and the live interactions of the session. Pending
 * questions are the union of what the log shows unanswered and what live state holds (live
 * wins), so an interaction registered a moment before its event commits is already answerable.
 */
export function sessionView(sessionId: string, snap: SessionSnapshot, live: Interaction[]): SessionView {
  const messages = viewMessages(snap.transcript);
  return { ...viewHead(sessionId, snap, live, messages.length), messages };
}

/**
 * `sessionView` as UTF-8 JSON pieces, equal to `JSON.stringify(sessionView(…))` up to key order:
 * the messages (almost all of the bytes) are serialized and encoded once per transcript state, in
 * slices between which the event loop runs, and reused while the session does not change, so
 * polling a long session re-serializes only the head.
 */
export async function renderSessionView(
  sessionId: string,
  snap: SessionSnapshot,
  live: Interaction[],
): Promise<Buffer[]> {
  let cached = messagesJson.get(snap.transcript);
  if (!cached) {
    cached = await messagesJsonOf(snap.transcript);
    messagesJson.set(snap.transcript, cached);
  }
  const head = JSON.stringify(viewHead(sessionId, snap, live, cached.count));
  return [Buffer.from(`${head.slice(0, -1)},"messages":`, "utf8"), ...cached.json, CLOSE_BRACE];
}

const CLOSE_BRACE = Buffer.from("}");

function viewHead(
  sessionId: string,
  snap: SessionSnapshot,
  live: Interaction[],
  messageCount: number,
): Omit<SessionView, "messages"> {
  const { transcript: t, projection: p } = snap;
  return {
    id: sessionId,
    title: t.title || p.title,
    origin: t.origin,
    kind: "chat",
    created_at_ms: snap.createdAt,
    updated_at_ms: p.updatedAt,
    message_count: messageCount,
    has_unseen_completion: p.hasUnseenCompletion,
    completion_settled_at_ms: p.completionSettledAt,
    is_streaming: t.streaming,
    pending_questions: pendingQuestions(sessionId, t.pending, live),
    seq: t.lastSeq,
    epoch: snap.epoch,
  };
}

function viewMessage(m: TranscriptMessage, turn: TranscriptTurn | undefined): ViewMessage {
  const turnMeta = turn
    ? { turn_id: turn.turnId, turn_state: turn.state, interrupted: turn.interrupted }
    : {};
  if (m.role === "user") {
    return {
      id: m.index,
      message_id: m.id,
      role: "user",
      content: m.text,
      ts_ms: m.at,
      attachments: m.attachments,
      metadata: {
        ...turnMeta,
        attachments: m.attachments,
        interjection: m.interjection,
        source: m.source,
        ...metaView(m.meta),
      },
    };
  }
  return {
    id: m.index,
    message_id: m.id,
    role: "assistant",
    content: m.text,
    ts_ms: m.at,
    metadata: {
      ...turnMeta,
      segments: m.segments,
      toolCalls: m.toolCalls,
      jobs: m.jobs,
      reasoning: m.reasoning,
      updated_at_ms: m.updatedAt,
    },
  };
}

/** The message metadata in the view's spelling: `hitlResume` → `hitl_resume`, `voiceDurationMs` → `voice_duration_ms`. */
function metaView(meta: UserMessageMeta): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(meta))
    out[key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)] = value;
  return out;
}

function pendingQuestions(
  sessionId: string,
  fromLog: PendingInteraction[],
  live: Interaction[],
): PendingQuestion[] {
  const byId = new Map<string, Interaction>();
  for (const p of fromLog) byId.set(p.interactionId, loggedInteraction(sessionId, p));
  for (const i of live) byId.set(i.interactionId, i);
  return [...byId.values()]
    .sort((a, b) => a.requestedAt - b.requestedAt || (a.interactionId < b.interactionId ? -1 : 1))
    .map(interactionView);
}

/** A pending interaction as the session's log shows it, in the shape live state holds it. */
export function loggedInteraction(sessionId: string, { seq: _seq, ...p }: PendingInteraction): Interaction {
  return { ...p, sessionId };
}

export function interactionView(i: Interaction): PendingQuestion {
  const q: PendingQuestion = {
    interaction_id: i.interactionId,
    session_id: i.sessionId,
    turn_id: i.turnId,
    kind: i.kind,
    requested_at_ms: i.requestedAt,
  };
  if (i.action !== undefined) q.action = i.action;
  if (i.question !== undefined) q.question = i.question;
  if (i.options !== undefined) q.options = i.options;
  if (i.toolCallId !== undefined) q.tool_call_id = i.toolCallId;
  return q;
}
