import type {
  AttachmentShell,
  InteractionKind,
  MessageSource,
  Resolution,
  TurnEndState,
  TurnTrigger,
  UserMessageMeta,
} from "./events.js";

/** The transcript shapes the reducer in `transcript.ts` produces (§5 events as a person reads them). */

export interface ToolCall {
  id: string;
  name: string;
  args: unknown;
  /** `null` until the `tool/result` arrives. */
  ok: boolean | null;
  result: unknown;
  duration_ms: number | null;
}

/** An approval or question card, placed in the assistant message where it was asked. */
export interface InteractionBlock {
  type: "interaction";
  interactionId: string;
  kind: InteractionKind;
  action?: string;
  question?: string;
  options?: string[];
  /** The tool call it is about (an approval of that call, a question its tool asks). */
  toolCallId?: string;
  /** `null` while pending or when the turn ended without an answer. */
  resolution: Resolution | null;
}

/**
 * A background job an agent started, shown in the assistant message where it started. It may
 * outlive its turn: its outcome is filled in there when its `job/ended` arrives, turns later.
 */
export interface TranscriptJob {
  jobId: string;
  label: string;
  startedAt: number;
  /** `running` until the job's `job/ended`. */
  state: "running" | TurnEndState;
  endedAt: number | null;
  /** Ended by a fork that copied it running (see `job/ended`). */
  byFork?: true;
}

export type Segment =
  | { kind: "text"; text: string }
  | { kind: "tool"; toolId: string }
  | { kind: "job"; jobId: string }
  | { kind: "block"; block: InteractionBlock };

export interface UserTranscriptMessage {
  role: "user";
  /** 1-based position in the transcript of this epoch: stable, since messages are only appended. */
  index: number;
  /** The stored `messageId`. */
  id: string;
  seq: number;
  at: number;
  turnId: string | null;
  /** The text as shown to the operator (`display` when the prompt carried one). */
  text: string;
  source: MessageSource;
  attachments: AttachmentShell[];
  interjection: boolean;
  /** Left out of a shown transcript: sent hidden, or stamped `hidden` or with an `origin` (see `applyEvents`). */
  hidden: boolean;
  meta: UserMessageMeta;
}

export interface AssistantTranscriptMessage {
  role: "assistant";
  /** 1-based position in the transcript of this epoch: stable, since messages are only appended. */
  index: number;
  /** `<turnId>.<n>`: stable, so a live view and a replay name the same message alike. */
  id: string;
  seq: number;
  at: number;
  updatedAt: number;
  turnId: string;
  text: string;
  reasoning: string;
  segments: Segment[];
  toolCalls: ToolCall[];
  jobs: TranscriptJob[];
}

export type TranscriptMessage = UserTranscriptMessage | AssistantTranscriptMessage;

export type TurnStatus = "working" | "input-required" | TurnEndState;

export interface TranscriptTurn {
  turnId: string;
  trigger: TurnTrigger;
  state: TurnStatus;
  startedAt: number;
  endedAt: number | null;
  startSeq: number;
  /** Stopped before it ran to its own end: `cancelled` by a person or `interrupted` by the host. */
  interrupted: boolean;
  error?: string;
  /** Ended by a fork that copied it open (see `turn/end`). */
  byFork?: true;
}

export interface PendingInteraction {
  interactionId: string;
  turnId: string;
  kind: InteractionKind;
  requestedAt: number;
  seq: number;
  action?: string;
  question?: string;
  options?: string[];
  toolCallId?: string;
}

export interface TranscriptState {
  /** Highest seq applied; events at or below it are ignored, so re-delivery is harmless. */
  lastSeq: number;
  title: string;
  model: string | null;
  origin: string | null;
  createdAt: number | null;
  forkOf: { sessionId: string; seq: number } | null;
  messages: TranscriptMessage[];
  turns: TranscriptTurn[];
  /** Interactions requested and neither resolved nor closed by their turn's end. */
  pending: PendingInteraction[];
  /** Jobs started and not ended yet, with the position in `messages` of the message showing each. */
  runningJobs: { jobId: string; message: number }[];
  openTurnId: string | null;
  /** A turn is open: assistant output may still arrive. */
  streaming: boolean;
  /** Index of the assistant message that takes the next output of the open turn, or -1. */
  tail: number;
}

/** A fresh transcript; a follow `reset` means: start again from this. */
export function emptyTranscript(): TranscriptState {
  return {
    lastSeq: 0,
    title: "",
    model: null,
    origin: null,
    createdAt: null,
    forkOf: null,
    messages: [],
    turns: [],
    pending: [],
    runningJobs: [],
    openTurnId: null,
    streaming: false,
    tail: -1,
  };
}
