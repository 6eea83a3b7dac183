import type { LastState, NewEvent, PageResult, SessionEvent, SessionHeader } from "../../protocol/index.js";
import type { DismissalFilter, DismissalStore } from "./dismissals.js";
import type { EncodedRow } from "./encoded-event-arrays.js";
import type { ReadAsker } from "./fair-turns.js";
import type { SessionLease } from "./session-lease.js";

/**
 * The durable store boundary. The host only ever awaits these methods, so a PostgreSQL store
 * (leases with fencing, LISTEN/NOTIFY fanout) can replace the embedded SQLite one.
 * Expected outcomes are result values (`status`), exceptions are faults (`persistence_failure`).
 */
export interface SessionStore extends DismissalStore {
  create(input: CreateInput): Promise<CreateOutcome>;
  fork(input: ForkInput): Promise<ForkOutcome>;
  /**
   * Group-committed: resolves only after the transaction holding these events committed. A
   * `turn/end` of a turn that is not the log's open one is left out (`withoutEndsOfClosedTurns`).
   */
  append<O extends AppendOptions = Record<never, never>>(
    sessionId: string,
    events: NewEvent[],
    options?: O,
  ): Promise<AppendOutcome<O>>;
  /** Compare-and-clear; refused while the log shows an open turn. */
  clear(sessionId: string, options?: { expectedEpoch?: string; at?: number }): Promise<ClearOutcome>;
  /** Deletes events, projection and attachments; writes a tombstone that never expires. */
  delete(sessionId: string): Promise<{ status: "deleted" } | { status: "not_found" } | { status: "retired" }>;

  header(sessionId: string): Promise<HeaderOutcome>;
  projection(sessionId: string): Promise<SessionProjection | null>;
  page(sessionId: string, query: PageQuery): Promise<PageOutcome>;
  /**
   * Events with seq > afterSeq in the current epoch, ascending: at most `limit`, and no more once
   * their data reached `Limits.eventItemBytes` (at least one event). A read can end before the
   * head with fewer than `limit` events; the log goes on while the last seq is below `headSeq`.
   */
  readAfter(sessionId: string, afterSeq: number, limit: number): Promise<ReadOutcome>;
  /**
   * The same events as `readAfter`, already MessagePack-encoded: arrays of at most `perArray`
   * `{seq, at, type, data}` maps, each decoding to exactly what `readAfter` returns for its part,
   * and each preceded by `envelope` (default none) so a caller's wrapper costs no copy. The bytes
   * may be shared with other callers and must not be modified.
   */
  readAfterEncoded(
    sessionId: string,
    afterSeq: number,
    limit: number,
    perArray: number,
    envelope?: Uint8Array,
  ): Promise<EncodedReadOutcome>;
  list(query: ListQuery): Promise<{ rows: SessionProjection[]; next?: string }>;
  /**
   * Message text search: with an `owner`, over its sessions alone. Searches run a few at a time,
   * taken in turns by `asker` (its principal), and one whose asker's signal fires while it waits
   * is dropped, never run, and fails `aborted`.
   */
  search(
    query: string,
    limit: number,
    owner?: string,
    asker?: ReadAsker,
  ): Promise<{ sessionId: string; seq: number; snippet: string }[]>;
  isRetired(sessionId: string): Promise<boolean>;
  /**
   * Bytes the owner stores, as of the last commit: the event data of its sessions (MessagePack,
   * as `data` is kept) and its attachments. Every transaction that adds or removes either moves it.
   */
  ownerStoredBytes(owner: string): Promise<number>;

  findPrompt(sessionId: string, clientMessageId: string): Promise<PromptRecord | null>;
  recordPrompt(sessionId: string, clientMessageId: string, result: PromptRecord): Promise<void>;
  /** Clears `hasUnseenCompletion` only if `completionSettledAt` is still the newest completion. */
  ack(
    sessionId: string,
    completionSettledAt: number,
  ): Promise<{ status: "ok"; hasUnseenCompletion: boolean } | { status: "not_found" }>;

  putAttachment(input: { owner: string; name: string; type: string; bytes: Uint8Array }): Promise<string>;
  /**
   * Deletes an attachment no message references yet (inline bytes kept for a prompt that was then
   * refused); one a message links is left alone, as is an unknown id.
   */
  discardAttachment(attachmentId: string): Promise<void>;
  /** The whole body in one buffer (a prompt hands it to the agent); streams use `attachmentChunks`. */
  getAttachment(attachmentId: string): Promise<StoredAttachment | null>;
  /** Who owns an attachment, its name, type and size, without reading its bytes. */
  attachmentInfo(attachmentId: string): Promise<AttachmentInfo | null>;
  /** Its bytes in stored chunks, each read when the consumer asks for it. */
  attachmentChunks(attachmentId: string): AsyncIterable<Uint8Array>;

  /**
   * Closes every turn the log shows open with `turn/end {state:"interrupted"}` (and running jobs
   * with `job/ended`), except turns parked on pending interactions (they wait for their answer)
   * and sessions whose unexpired lease another host than `options.hostId` holds (any host, when
   * omitted): their agent still runs there. Returns the closed sessions' ids.
   */
  interruptOpenTurns(at: number, options?: { hostId?: string }): Promise<string[]>;
  /** Folds every live session's projection again from its log, and counts every owner's stored bytes again. */
  rebuildProjections(): Promise<void>;

  /**
   * Per-session commit notices, delivered synchronously right after the commit, in commit order,
   * each seq once and with no gap from the first one delivered on. With several instances on one
   * database, that first notice may start past seqs another instance committed as the listener
   * subscribed: a follower reads the log from its cursor after subscribing, and so has those.
   */
  subscribe(sessionId: string, listener: CommitListener): () => void;
  /**
   * Every session's commit notices, with the projection row computed in the same transaction
   * (null for a delete and a dismissal).
   */
  subscribeAll(
    listener: (sessionId: string, notice: CommitNotice, projection: SessionProjection | null) => void,
  ): () => void;
  close(): Promise<void>;
}

/**
 * `stored`, when present, is `events` as the log holds them (data already MessagePack), so a
 * transport writes them without encoding their data again (see `encodeEventArrays`).
 *
 * `meta`: the session changed outside its log (an acknowledgement, with the new row). With
 * `dismissal`, a principal dismissed or restored it: only that principal's lists changed, its row
 * did not, so the notice carries no projection (null) and says nothing of who; list caches drop
 * their answers on it, and nothing is sent to any stream for it. With `created` (PostgreSQL only),
 * another host created or forked the session while this host's LISTEN connection was down: read
 * back afterwards from its row alone (its log was not read), told as its create's NOTIFY would
 * have been, so this host's sockets hear of it.
 *
 * `remote` (PostgreSQL only): another host created, deleted or appended to the session, so nothing
 * done here announced it to this host's sockets; a delete's carries the session's owner, who may
 * see it. A remote `create` carries only the rows the create or fork wrote, however late they were
 * read: rows committed after them come as `append`, as if read in time. A long one (a fork) comes
 * in several `create` notices, a read page each: only the first starts at seq 1. A create this
 * host's sockets were told of already (as `meta` `created`, by a re-read that ran before its
 * NOTIFY was handled) comes without `remote`.
 */
export type CommitNotice =
  | {
      kind: "append";
      epoch: string;
      events: SessionEvent[];
      stored?: readonly EncodedRow[];
      remote?: true;
    }
  | { kind: "clear"; epoch: string }
  | { kind: "delete"; remote?: { owner: string } }
  | {
      kind: "create";
      epoch: string;
      events: SessionEvent[];
      stored?: readonly EncodedRow[];
      remote?: true;
    }
  | { kind: "meta"; dismissal?: true; created?: true };
export type CommitListener = (notice: CommitNotice) => void;

export interface CreateInput {
  sessionId: string;
  owner: string;
  title?: string;
  model: string;
  origin?: string;
  at?: number;
  /** The owner's live sessions, this one included, may not exceed it (`too_many_sessions`). */
  maxOwnerSessions?: number;
}
export interface ForkInput {
  sourceId: string;
  targetId: string;
  owner: string;
  /** Default: the source's head; past it the fork is refused (`seq_past_head`). */
  atSeq?: number;
  at?: number;
  /** As `CreateInput.maxOwnerSessions`, for the new session's owner. */
  maxOwnerSessions?: number;
  /**
   * The most stored event data the copied prefix may hold: a fork copies its prefix in one
   * transaction, holding it in memory, so a larger one is refused (`too_large`), nothing written.
   */
  maxDataBytes?: number;
  /** The most events the copied prefix may hold (its `atSeq`): more is refused as `too_large`. */
  maxEvents?: number;
}
export type CreateOutcome =
  | { status: "created"; header: SessionHeader; events: SessionEvent[] }
  | { status: "exists" }
  | { status: "retired" }
  | { status: "too_many_sessions"; max: number };
export type ForkOutcome =
  | CreateOutcome
  | { status: "source_not_found" }
  | { status: "source_retired" }
  /** `atSeq` is past the source's head, `headSeq` in its current epoch. */
  | { status: "seq_past_head"; headSeq: number }
  /** The prefix holds more event data than `ForkInput.maxDataBytes`, or more events than `maxEvents`. */
  | { status: "too_large"; maxDataBytes: number };

/** What a queue edit changes of a queued prompt (`LiveStateStore.editQueueItem`). */
export type QueuedText = { text: string; display?: string | undefined };

export interface AppendOptions {
  expectedEpoch?: string;
  /** Recorded in the same transaction: a retried prompt finds it and appends nothing. */
  prompt?: { clientMessageId: string; record: PromptRecord };
  /**
   * Deletes this queue item in the same transaction (a queued prompt starting, or steered into
   * `turnId`), and rewrites its prompt key to `{queued:false, turnId, seq}` of the appended
   * `user/message`. When the item is no longer queued nothing is appended: `queue_item_gone`.
   * `read` is the item's text (and display text) as the caller read it and made the events of:
   * an item edited since is no longer the one it read, and is `queue_item_gone` too.
   */
  dequeue?: { itemId: string; turnId: string; read?: QueuedText };
  /**
   * The lease the append is made under (an agent's own events, `continueTurn`, job events):
   * checked inside the append transaction; unless it is still the session's current, unexpired
   * lease nothing is appended and the outcome is `fenced`.
   */
  fence?: SessionLease;
  at?: number;
}
/**
 * What an append answers, given its options: each refusal that an option asks for comes only
 * when that option is given, so a caller that gives none has none of them to handle.
 */
export type AppendOutcome<O extends AppendOptions = AppendOptions> =
  | { status: "appended"; epoch: string; events: SessionEvent[] }
  | { status: "not_found" }
  | { status: "retired" }
  | Given<O, "expectedEpoch", { status: "epoch_mismatch"; epoch: string }>
  /** `options.prompt` was already recorded (a concurrent retry won): nothing was appended. */
  | Given<O, "prompt", { status: "duplicate"; record: PromptRecord }>
  /** `options.dequeue` named an item no longer queued (removed or started): nothing was appended. */
  | Given<O, "dequeue", { status: "queue_item_gone" }>
  /** `options.fence` is no longer the session's current lease (taken over, expired, released): nothing was appended. */
  | Given<O, "fence", { status: "fenced" }>;

/** `Outcome` when the options may hold `option` (an optional member counts), else nothing. */
type Given<O, option extends keyof AppendOptions, Outcome> = option extends keyof O ? Outcome : never;

export type ClearOutcome =
  | { status: "cleared"; epoch: string }
  | { status: "busy" }
  | { status: "epoch_mismatch"; epoch: string }
  | { status: "not_found" }
  | { status: "retired" };

export type HeaderOutcome =
  | { status: "ok"; header: SessionHeader; headSeq: number }
  | { status: "not_found" }
  | { status: "retired" };

export interface PageQuery {
  afterSeq?: number;
  beforeSeq?: number;
  limit: number;
}
export type PageOutcome =
  | ({ status: "ok" } & Omit<PageResult, "projection"> & { projection: SessionProjection })
  | { status: "not_found" }
  | { status: "retired" };

export type ReadOutcome =
  | {
      status: "ok";
      epoch: string;
      headSeq: number;
      events: SessionEvent[];
      /** The events' data as stored (MessagePack bytes): what the read's budget counted. */
      dataBytes: number;
    }
  | { status: "not_found" }
  | { status: "retired" };

export type EncodedReadOutcome =
  | {
      status: "ok";
      epoch: string;
      headSeq: number;
      /** Events in all arrays together. */
      count: number;
      /** Seq of the last event read; `afterSeq` when none was. */
      lastSeq: number;
      /** Each is `envelope` followed by one MessagePack array. */
      arrays: readonly Uint8Array[];
    }
  | { status: "not_found" }
  | { status: "retired" };

export interface ListQuery {
  limit: number;
  parked?: boolean;
  before?: string;
  /** Undefined = every owner (admin). */
  owner?: string;
  /** Seen through one principal's dismissals. Undefined = every session, dismissed or not. */
  dismissals?: DismissalFilter;
}

/** The cached projection row; the host adds `live` and `running` from live state. */
export interface SessionProjection {
  sessionId: string;
  owner: string;
  title: string;
  model: string;
  createdAt: number;
  updatedAt: number;
  lastPromptAt: number | null;
  turnCount: number;
  blank: boolean;
  lastState: LastState;
  messageCount: number;
  /** The log seq this row reflects. */
  seq: number;
  epoch: string;
  openTurnId: string | null;
  hasUnseenCompletion: boolean;
  completionSettledAt: number | null;
}

export interface PromptRecord {
  queued: boolean;
  seq?: number;
  turnId?: string;
  itemId?: string;
}

export interface AttachmentInfo {
  attachmentId: string;
  owner: string;
  /** The session whose stored message or queued prompt references it; null until one does. */
  sessionId?: string | null;
  name: string;
  type: string;
  size: number;
}

/** An attachment whose bytes are read, chunk by chunk, as `chunks()` is iterated. */
export interface AttachmentBody extends AttachmentInfo {
  chunks(): AsyncIterable<Uint8Array>;
}

export interface StoredAttachment extends AttachmentInfo {
  bytes: Uint8Array;
}
