import type { Interaction, Resolution, SessionEvent } from "../../protocol/index.js";

/** What an agent may append during its turn; the controller adds `turnId`. */
export type AgentEmit =
  | { type: "assistant/delta"; text: string }
  | { type: "reasoning/delta"; text: string }
  | { type: "tool/call"; toolCallId: string; name: string; args: unknown }
  | { type: "tool/result"; toolCallId: string; ok: boolean; result: unknown; durationMs: number };

/** `toolCallId` names the tool call an interaction is about, so an answer maps back to it. */
export type InteractionRequest =
  | { kind: "approval"; action: string; toolCallId?: string }
  | { kind: "question"; question: string; options?: string[]; toolCallId?: string };

/** An interaction of a parked turn and the answer it got while no process was waiting for it. */
export interface ParkedAnswer {
  interaction: Interaction;
  resolution: Resolution;
}

export interface JobHandle {
  readonly jobId: string;
  /** Aborted when the job is cancelled (its session detached or the host shut down). */
  readonly signal: AbortSignal;
  /** 0..1 */
  progress(value: number): void;
  complete(): void;
  fail(): void;
}

export interface TurnAttachment {
  name: string;
  type: string;
  size: number;
  bytes?: Uint8Array;
  url?: string;
}

/** Everything a turn may do. Every emit resolves after the event is committed. */
export interface TurnContext {
  readonly sessionId: string;
  readonly turnId: string;
  readonly model: string;
  /** The model-facing prompt (not the stored `display` text); empty for server-fired turns. */
  readonly prompt: { text: string; attachments: TurnAttachment[] };
  /** Aborted by `session.cancel`, `session.delete` or host shutdown. */
  readonly signal: AbortSignal;
  /**
   * The session's committed log so far (for agents that send history to a model), at most the
   * host's transcript bound of stored event data (32 MiB by default): past it, it throws
   * `transcript_too_large` and `historyPage` reads the recent past instead.
   */
  history(): Promise<SessionEvent[]>;
  /**
   * One page of the log before `beforeSeq` (default: its head), ascending: at most 500 events and
   * no more once their data reached 1 MiB; `hasMore` while earlier events exist. For agents that
   * read only the recent past, from the newest page back.
   */
  historyPage(beforeSeq?: number): Promise<{ events: SessionEvent[]; hasMore: boolean }>;
  emit(event: AgentEmit): Promise<void>;
  /** Records `interaction/requested`, parks the turn as `input-required`, resolves with the answer. */
  requestInteraction(request: InteractionRequest): Promise<Resolution>;
  /**
   * Steered queue items delivered since the last call; taking them records each as an interjection
   * (`user/message {interjection:true}`) where the agent reads it. Items never taken before the
   * turn ends run as the next prompt instead.
   */
  takeInterjections(): Promise<string[]>;
  /**
   * A background job that may outlive the turn. Throws `overloaded` (`data.limit`
   * `running_jobs_per_session` or `running_jobs_per_principal`), starting nothing, while the
   * session (64 by default) or its owner's sessions on this host (1,000) run the most jobs allowed.
   * Once the turn was stopped and its session let go (deleted, its lease lost), throws the turn's
   * `signal.reason`, starting nothing.
   */
  startJob(label: string): JobHandle;
}

export interface TurnOutcome {
  state: "completed" | "failed" | "cancelled";
  error?: string;
}

/** A pluggable executor of turns (`demo`, `openai`, …). */
export interface AgentDriver {
  readonly name: string;
  models(): { id: string; label: string }[];
  readonly defaultModel: string;
  runTurn(turn: TurnContext): Promise<TurnOutcome>;
  /**
   * Continues a turn that was parked on interactions when its host stopped. Called once every
   * pending interaction of the turn is answered, with the same turn id; `turn.history()` holds the
   * turn's events so far. A driver without it has such a turn closed as `interrupted` once answered.
   */
  continueTurn?(turn: TurnContext, answers: ParkedAnswer[]): Promise<TurnOutcome>;
  close?(): Promise<void>;
}
