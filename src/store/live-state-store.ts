import type {
  AttachmentInput,
  Interaction,
  Resolution,
  SessionEvent,
  UserMessageMeta,
} from "../../protocol/index.js";
import type { LeaseHolder, SessionLeaseStore } from "./session-lease.js";
import type { PromptRecord, SessionStore } from "./session-store.js";

/** What a host needs: the log, live-state and lease contracts, from one store. */
export type HostStore = SessionStore & LiveStateStore & SessionLeaseStore;

/**
 * The durable live state of protocol-v1 §5 (queued prompts, pending interactions, ownership),
 * separate from the log contract so each can be implemented on its own. Every change commits in
 * the same transaction as the log events it implies, and is announced after COMMIT as a
 * `LiveStateNotice`: the rows are the single source of truth, in-memory copies are caches.
 * Expected outcomes are result values; exceptions are faults.
 */
export interface LiveStateStore {
  /**
   * Queues a prompt and records its idempotency key `{queued:true,itemId}` in one transaction.
   * `limits` are checked inside it, so concurrent prompts cannot overshoot them.
   */
  enqueuePrompt(input: EnqueueInput): Promise<EnqueueOutcome>;
  /**
   * Replaces a queued item's text. An edit that grows it past `maxBytesPerOwner` (the owner's
   * queued bytes, checked inside the transaction as `enqueuePrompt` does) is refused and changes
   * nothing; one that shrinks it always passes.
   */
  editQueueItem(
    sessionId: string,
    itemId: string,
    text: string,
    maxBytesPerOwner?: number,
  ): Promise<QueueEditOutcome>;
  removeQueueItem(sessionId: string, itemId: string): Promise<QueueChangeOutcome>;
  clearQueue(sessionId: string): Promise<QueueChangeOutcome>;
  /**
   * Steers an item into the running turn `turnId`: it moves first and stays queued until the
   * agent takes it (an `append` with `dequeue`); untaken at the turn's end it runs next.
   */
  steerQueueItem(sessionId: string, itemId: string, turnId: string): Promise<QueueChangeOutcome>;
  queue(sessionId: string): Promise<StoredQueueItem[]>;
  /**
   * The bytes of every prompt the owner has queued, as `enqueuePrompt` counts them against
   * `maxBytesPerOwner`: read outside its transaction, so a write committing meanwhile may change it.
   */
  queuedBytes(owner: string): Promise<number>;

  /**
   * First responder wins, decided inside one transaction: a pending interaction becomes resolved
   * and `interaction/resolved` is appended; the same answer again is a `repeat`; a different one
   * a `conflict` carrying the winner; a withdrawn or unknown one `not_found`.
   */
  resolveInteraction(interactionId: string, resolution: Resolution, at?: number): Promise<ResolveOutcome>;
  /** Any interaction still known (pending, resolved or withdrawn), with its session's owner. */
  interaction(interactionId: string): Promise<StoredInteraction | null>;
  /** Every interaction a turn requested, in request order. */
  turnInteractions(sessionId: string, turnId: string): Promise<StoredInteraction[]>;

  /**
   * A running job's progress (0..1), row only (announced as `job.progress`); `not_found` once
   * the job ended.
   */
  setJobProgress(jobId: string, progress: number): Promise<{ status: "ok" } | { status: "not_found" }>;

  /**
   * The live state of up to `limit` sessions with queued prompts, pending interactions or running
   * jobs, in session id order after `after` (null: from the start); `next` continues, null at the
   * end. Paged so that restoring thousands of sessions never holds the event loop for long.
   */
  liveStatePage(after: string | null, limit: number): Promise<LiveStatePage>;

  /**
   * Live-state notices, in commit order: this instance's synchronously after each commit; on a
   * shared store also every other instance's (after their commit, re-read from the rows, each
   * delivered once; a missed wake-up is repaired by re-reading).
   */
  subscribeLive(listener: (notice: LiveStateNotice) => void): () => void;
}

/** A prompt as accepted (attachments as sent: inline bytes are kept until the prompt starts). */
export interface QueuedPromptInput {
  clientMessageId?: string;
  text: string;
  display?: string;
  hidden?: boolean;
  attachments?: AttachmentInput[];
  meta?: UserMessageMeta;
}

export interface StoredQueueItem {
  itemId: string;
  sessionId: string;
  owner: string;
  queuedAt: number;
  input: QueuedPromptInput;
}

export interface QueueLimits {
  /** Items one session may hold queued. */
  maxItemsPerSession: number;
  /** Queued prompt bytes (text, display, inline attachments) one owner may hold across sessions. */
  maxBytesPerOwner: number;
}

export interface EnqueueInput {
  sessionId: string;
  itemId: string;
  queuedAt: number;
  input: QueuedPromptInput;
  limits?: QueueLimits;
}

export type EnqueueOutcome =
  | { status: "queued"; item: StoredQueueItem }
  /** The clientMessageId was already recorded: nothing was queued. */
  | { status: "duplicate"; record: PromptRecord }
  | { status: "queue_full"; limit: "items_per_session" | "bytes_per_owner"; max: number }
  | { status: "not_found" }
  | { status: "retired" };

export type QueueChangeOutcome =
  | { status: "ok"; items: StoredQueueItem[] }
  | { status: "item_not_found" }
  | { status: "not_found" };

export type QueueEditOutcome =
  | QueueChangeOutcome
  | { status: "queue_full"; limit: "bytes_per_owner"; max: number };

export type InteractionState = "pending" | "resolved" | "withdrawn";

export interface StoredInteraction {
  interaction: Interaction;
  owner: string;
  state: InteractionState;
  resolution?: Resolution;
}

export type ResolveOutcome =
  | {
      status: "resolved";
      interaction: Interaction;
      events: SessionEvent[];
      /** Interactions of the same turn still pending after this one. */
      pendingInTurn: number;
    }
  | { status: "repeat"; interaction: Interaction }
  | { status: "conflict"; winner: Resolution }
  | { status: "not_found" };

export interface SessionLiveState {
  sessionId: string;
  owner: string;
  model: string;
  queue: StoredQueueItem[];
  /** Pending ones only. */
  interactions: Interaction[];
  /** The open turn when it waits on pending interactions (parked), else null. */
  parkedTurnId: string | null;
  /** Jobs still running. */
  jobs: StoredJob[];
  /** The unexpired lease of the session's agent, null when none (always null on SQLite without leases). */
  lease: LeaseHolder | null;
}

export interface StoredJob {
  jobId: string;
  sessionId: string;
  turnId: string;
  label: string;
  /** 0..1 */
  progress: number;
  startedAt: number;
}

export interface LiveStatePage {
  sessions: SessionLiveState[];
  next: string | null;
}

export type LiveStateNotice =
  | { kind: "queue"; sessionId: string; owner: string; items: StoredQueueItem[] }
  | { kind: "interaction.requested"; owner: string; interaction: Interaction }
  | {
      kind: "interaction.resolved";
      owner: string;
      sessionId: string;
      interactionId: string;
      resolution: Resolution;
    }
  | { kind: "interaction.withdrawn"; owner: string; sessionId: string; interactionId: string }
  | { kind: "job.progress"; owner: string; sessionId: string; jobId: string; progress: number }
  /**
   * The session's lease changed: taken (`hostId`), or released or expired-and-closed (`hostId`
   * null). `generation` is the lease's fencing token. Renewals are not announced.
   */
  | { kind: "lease"; owner: string; sessionId: string; hostId: string | null; generation: number };
