import { randomBytes } from "node:crypto";
import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import Database from "better-sqlite3";
import type { NewEvent, Resolution, SessionEvent } from "../../protocol/index.js";
import { AttachmentSweeper } from "./attachment-sweeper.js";
import { CommitListeners, type GlobalCommitListener, type StoreFaultLog } from "./commit-listeners.js";
import { DatabaseLock } from "./database-lock.js";
import { type EncodedRow, encodeEventArrays } from "./encoded-event-arrays.js";
import { decodeValue } from "./event-codec.js";
import { GroupCommit, type GroupCommitStats } from "./group-commit.js";
import { isStorageFailure, persistenceFailure } from "./io-errors.js";
import { ListQueries } from "./list-query.js";
import { LiveRows } from "./live-rows.js";
import { LiveStateOperations } from "./live-state-operations.js";
import type {
  EnqueueInput,
  EnqueueOutcome,
  LiveOwner,
  LiveStateNotice,
  LiveStatePage,
  LiveStateStore,
  QueueChangeOutcome,
  ResolveOutcome,
  StoredInteraction,
  StoredQueueItem,
} from "./live-state-store.js";
import { decodeRow, LogWriter, type StoredRow } from "./log-writer.js";
import { migrate } from "./migrations.js";
import { publicProjection } from "./projection.js";
import { ReadCache } from "./read-cache.js";
import { toFtsQuery } from "./search-query.js";
import type {
  LeaseHolder,
  LeaseOutcome,
  RenewOutcome,
  SessionLease,
  SessionLeaseStore,
} from "./session-lease.js";
import { headerOf, type SessionStateRow, stateFromRow } from "./session-state.js";
import type {
  AppendOptions,
  AppendOutcome,
  ClearOutcome,
  CommitListener,
  CreateInput,
  CreateOutcome,
  EncodedReadOutcome,
  ForkInput,
  ForkOutcome,
  HeaderOutcome,
  ListQuery,
  PageOutcome,
  PageQuery,
  PromptRecord,
  ReadOutcome,
  SessionProjection,
  SessionStore,
  StoredAttachment,
} from "./session-store.js";
import { SqliteLeaseOperations } from "./sqlite-lease-operations.js";
import { prepareStatements, type Statements } from "./sqlite-statements.js";
import { assertStorable } from "./storable-data.js";
import type { StoreMetrics } from "./store-metrics.js";
import { WriteOperations } from "./write-operations.js";

export interface SqliteStoreOptions {
  metrics?: StoreMetrics;
  /** @default process warnings — where a throwing commit listener is reported. */
  logger?: StoreFaultLog;
  /** Clock for `at` of events the store stamps itself. @default Date.now */
  now?: () => number;
  /**
   * A reader beside the host that holds the file (tools, tests): takes no lock, refuses every
   * write (`query_only`) and never migrates. @default false
   */
  readOnly?: boolean;
}

/**
 * The embedded durable store: one better-sqlite3 connection in WAL mode with
 * `synchronous=FULL`, group-committed writes (see `GroupCommit`) and synchronous reads.
 */
export class SqliteSessionStore implements SessionStore, LiveStateStore, SessionLeaseStore {
  private readonly statements: Statements;
  private readonly writer: LogWriter;
  private readonly writes: GroupCommit;
  private readonly ops: WriteOperations;
  private readonly liveRows: LiveRows;
  private readonly liveOps: LiveStateOperations;
  private readonly leases: SqliteLeaseOperations;
  private readonly lists: ListQueries;
  private readonly listeners: CommitListeners;
  private readonly cache = new ReadCache();
  private readonly defaultMaxPages: number;
  private closed: Promise<void> | undefined;

  private constructor(
    private readonly db: Database.Database,
    options: SqliteStoreOptions,
    private readonly lock?: DatabaseLock,
  ) {
    this.listeners = new CommitListeners(options.logger, () => options.metrics?.listenerFailed?.());
    this.statements = prepareStatements(db);
    this.liveRows = new LiveRows(this.statements);
    this.writer = new LogWriter(this.statements, this.liveRows);
    const now = options.now ?? Date.now;
    this.leases = new SqliteLeaseOperations(this.writer, this.statements, now);
    this.ops = new WriteOperations(this.writer, this.statements, this.liveRows, this.leases, now);
    this.liveOps = new LiveStateOperations(this.writer, this.liveRows, this.statements, now);
    this.lists = new ListQueries(db);
    this.defaultMaxPages = db.pragma("max_page_count", { simple: true }) as number;
    this.writes = new GroupCommit(
      db,
      {
        beforeTransaction: () => this.writer.trimCache(),
        finishTransaction: (batch) => {
          this.cache.clear();
          this.writer.writeBack(batch);
        },
        afterRollback: () => {
          this.cache.clear();
          this.writer.dropCache();
        },
        deliver: (batch) => this.listeners.deliver(batch.notices, batch.liveNotices),
      },
      options.metrics,
    );
  }

  /** Opens (creating the folder and file if missing) and migrates the database at `path`. */
  static open(path: string, options: SqliteStoreOptions = {}): SqliteSessionStore {
    if (path !== ":memory:") mkdirSync(dirname(path), { recursive: true });
    const readOnly = options.readOnly === true;
    const lock = path === ":memory:" || readOnly ? undefined : DatabaseLock.acquire(path);
    const db = new Database(path);
    try {
      if (readOnly) {
        db.pragma("query_only = ON");
        db.pragma("busy_timeout = 5000");
        return new SqliteSessionStore(db, options);
      }
      db.pragma("journal_mode = WAL");
      // an acknowledged append must survive power loss, not only a process crash
      db.pragma("synchronous = FULL");
      db.pragma("foreign_keys = OFF");
      db.pragma("busy_timeout = 5000");
      migrate(db);
      return new SqliteSessionStore(db, options, lock);
    } catch (err) {
      db.close();
      lock?.release();
      throw err;
    }
  }

  create(input: CreateInput): Promise<CreateOutcome> {
    return this.writes.submit(this.ops.create(input));
  }

  fork(input: ForkInput): Promise<ForkOutcome> {
    return this.writes.submit(this.ops.fork(input));
  }

  append(sessionId: string, events: NewEvent[], options?: AppendOptions): Promise<AppendOutcome> {
    try {
      assertStorable(events);
    } catch (err) {
      return Promise.reject(err);
    }
    return this.writes.submit(this.ops.append(sessionId, events, options));
  }

  clear(sessionId: string, options: { expectedEpoch?: string; at?: number } = {}): Promise<ClearOutcome> {
    return this.writes.submit(this.ops.clear(sessionId, options.expectedEpoch));
  }

  delete(
    sessionId: string,
  ): Promise<{ status: "deleted" } | { status: "not_found" } | { status: "retired" }> {
    return this.writes.submit(this.ops.delete(sessionId));
  }

  ack(
    sessionId: string,
    completionSettledAt: number,
  ): Promise<{ status: "ok"; hasUnseenCompletion: boolean } | { status: "not_found" }> {
    return this.writes.submit(this.ops.ack(sessionId, completionSettledAt));
  }

  recordPrompt(sessionId: string, clientMessageId: string, result: PromptRecord): Promise<void> {
    return this.writes.submit(this.ops.recordPrompt(sessionId, clientMessageId, result));
  }

  putAttachment(input: { owner: string; name: string; type: string; bytes: Uint8Array }): Promise<string> {
    return this.writes.submit(this.ops.putAttachment(randomBytes(16).toString("base64url"), input));
  }

  interruptOpenTurns(at: number, options: { hostId?: string } = {}): Promise<string[]> {
    return this.writes.submit(this.ops.interruptOpenTurns(at, options.hostId));
  }

  acquireLease(sessionId: string, hostId: string, ttlMs: number): Promise<LeaseOutcome> {
    return this.writes.submit(this.leases.acquire(sessionId, hostId, ttlMs));
  }

  renewLeases(hostId: string, leases: readonly SessionLease[], ttlMs: number): Promise<RenewOutcome> {
    return this.writes.submit(this.leases.renew(hostId, leases, ttlMs));
  }

  releaseLease(lease: SessionLease): Promise<void> {
    return this.writes.submit(this.leases.release(lease));
  }

  leaseHolder(sessionId: string): Promise<LeaseHolder | null> {
    return this.read(() => this.leases.holder(sessionId));
  }

  leasePage(after: string | null, limit: number): Promise<{ leases: LeaseHolder[]; next: string | null }> {
    return this.read(() => this.leases.page(after, limit));
  }

  rebuildProjections(): Promise<void> {
    return this.writes.submit(this.ops.rebuildProjections());
  }

  enqueuePrompt(input: EnqueueInput): Promise<EnqueueOutcome> {
    return this.writes.submit(this.liveOps.enqueue(input));
  }

  editQueueItem(sessionId: string, itemId: string, text: string): Promise<QueueChangeOutcome> {
    return this.writes.submit(this.liveOps.edit(sessionId, itemId, text));
  }

  removeQueueItem(sessionId: string, itemId: string): Promise<QueueChangeOutcome> {
    return this.writes.submit(this.liveOps.remove(sessionId, itemId));
  }

  clearQueue(sessionId: string): Promise<QueueChangeOutcome> {
    return this.writes.submit(this.liveOps.clear(sessionId));
  }

  steerQueueItem(sessionId: string, itemId: string, turnId: string): Promise<QueueChangeOutcome> {
    return this.writes.submit(this.liveOps.steer(sessionId, itemId, turnId));
  }

  queue(sessionId: string): Promise<StoredQueueItem[]> {
    return this.read(() => this.liveRows.queue(sessionId));
  }

  resolveInteraction(interactionId: string, resolution: Resolution, at?: number): Promise<ResolveOutcome> {
    return this.writes.submit(this.liveOps.resolve(interactionId, resolution, at));
  }

  interaction(interactionId: string): Promise<StoredInteraction | null> {
    return this.read(() => this.liveRows.interaction(interactionId) ?? null);
  }

  turnInteractions(sessionId: string, turnId: string): Promise<StoredInteraction[]> {
    return this.read(() => this.liveRows.turnInteractions(sessionId, turnId));
  }

  setJobProgress(jobId: string, progress: number): Promise<{ status: "ok" } | { status: "not_found" }> {
    return this.writes.submit(this.ops.setJobProgress(jobId, progress));
  }

  takeOverLiveState(owner: LiveOwner, at: number): Promise<void> {
    return this.writes.submit(this.liveOps.takeOver(owner, at));
  }

  liveStatePage(after: string | null, limit: number): Promise<LiveStatePage> {
    // one read transaction, so a session's queue and interactions are one cut
    return this.read(() =>
      this.db.transaction(() => this.liveRows.page(after, limit, (id) => this.leases.holder(id)))(),
    );
  }

  subscribeLive(listener: (notice: LiveStateNotice) => void): () => void {
    return this.listeners.subscribeLive(listener);
  }

  header(sessionId: string): Promise<HeaderOutcome> {
    return this.read(() => {
      const row = this.stateRow(sessionId);
      if (!row) return this.missing(sessionId);
      const state = stateFromRow(row);
      return { status: "ok", header: headerOf(state), headSeq: state.headSeq };
    });
  }

  projection(sessionId: string): Promise<SessionProjection | null> {
    return this.read(() => {
      const row = this.stateRow(sessionId);
      return row ? publicProjection(stateFromRow(row).projection) : null;
    });
  }

  /** Ascending events; no cursor = the newest `limit` (the tail). */
  page(sessionId: string, query: PageQuery): Promise<PageOutcome> {
    return this.read(() => {
      const row = this.stateRow(sessionId);
      if (!row) return this.missing(sessionId);
      const state = stateFromRow(row);
      let events: SessionEvent[];
      let hasMore: boolean;
      if (query.afterSeq !== undefined) {
        const rows = this.statements.eventsAfter.all(sessionId, query.afterSeq, query.limit) as StoredRow[];
        events = rows.map(decodeRow);
        hasMore = (events[events.length - 1]?.seq ?? state.headSeq) < state.headSeq;
      } else {
        const before = query.beforeSeq ?? state.headSeq + 1;
        const rows = this.statements.eventsBefore.all(sessionId, before, query.limit) as StoredRow[];
        events = rows.reverse().map(decodeRow);
        hasMore = (events[0]?.seq ?? 1) > 1;
      }
      return {
        status: "ok",
        header: headerOf(state),
        epoch: state.epoch,
        headSeq: state.headSeq,
        events,
        hasMore,
        projection: publicProjection(state.projection),
      };
    });
  }

  readAfter(sessionId: string, afterSeq: number, limit: number): Promise<ReadOutcome> {
    return this.read(() => {
      const row = this.stateRow(sessionId);
      if (!row) return this.missing(sessionId);
      const rows = this.statements.eventsAfter.all(sessionId, afterSeq, limit) as StoredRow[];
      return { status: "ok", epoch: row.epoch, headSeq: row.head_seq, events: rows.map(decodeRow) };
    });
  }

  readAfterEncoded(
    sessionId: string,
    afterSeq: number,
    limit: number,
    perArray: number,
    envelope?: Uint8Array,
  ): Promise<EncodedReadOutcome> {
    return this.read(() => {
      const key = this.cache.encodedReadKey(sessionId, afterSeq, limit, perArray, envelope);
      const cached = this.cache.encodedRead(key);
      if (cached !== undefined) return cached;
      const row = this.stateRow(sessionId);
      if (!row) return this.missing(sessionId);
      const rows = this.statements.eventsAfterRaw.all(sessionId, afterSeq, limit) as EncodedRow[];
      const outcome = {
        status: "ok" as const,
        epoch: row.epoch,
        headSeq: row.head_seq,
        count: rows.length,
        lastSeq: rows[rows.length - 1]?.[0] ?? afterSeq,
        arrays: encodeEventArrays(rows, perArray, envelope),
      };
      this.cache.keepEncodedRead(key, outcome);
      return outcome;
    });
  }

  list(query: ListQuery): Promise<{ rows: SessionProjection[]; next?: string }> {
    return this.read(() => this.lists.run(query));
  }

  /** Message text search; any input is safe (see `toFtsQuery`). Snippets mark hits with `**`. */
  search(
    query: string,
    limit: number,
    owner?: string,
  ): Promise<{ sessionId: string; seq: number; snippet: string }[]> {
    return this.read(() => {
      const match = toFtsQuery(query);
      if (match === null) return [];
      const statement = owner === undefined ? this.statements.search : this.statements.searchOwned;
      const params = owner === undefined ? [match, limit] : [match, owner, limit];
      return statement.all(...params) as { sessionId: string; seq: number; snippet: string }[];
    });
  }

  isRetired(sessionId: string): Promise<boolean> {
    return this.read(() => this.statements.tombstone.get(sessionId) !== undefined);
  }

  findPrompt(sessionId: string, clientMessageId: string): Promise<PromptRecord | null> {
    return this.read(() => {
      const stored = this.statements.findPrompt.get(sessionId, clientMessageId) as Uint8Array | undefined;
      return stored ? decodeValue<PromptRecord>(stored) : null;
    });
  }

  getAttachment(attachmentId: string): Promise<StoredAttachment | null> {
    return this.read(() => {
      const row = this.statements.attachment.get(attachmentId) as
        | {
            attachment_id: string;
            owner: string;
            session_id: string | null;
            name: string;
            type: string;
            size: number;
            bytes: Buffer;
          }
        | undefined;
      if (!row) return null;
      const { attachment_id: id, owner, session_id: sessionId, name, type, size, bytes } = row;
      // The row's Buffer is already this read's own copy: no second one.
      return {
        attachmentId: id,
        owner,
        sessionId,
        name,
        type,
        size,
        bytes: new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength),
      };
    });
  }

  subscribe(sessionId: string, listener: CommitListener): () => void {
    return this.listeners.subscribe(sessionId, listener);
  }

  subscribeAll(listener: GlobalCommitListener): () => void {
    return this.listeners.subscribeAll(listener);
  }

  /** Quota and expiry of uploads that no prompt references yet. */
  attachmentSweeper(): AttachmentSweeper {
    return new AttachmentSweeper(this.db);
  }

  /** Write-transaction counters; `transactions` grows by one per group commit. */
  stats(): GroupCommitStats {
    return this.writes.stats();
  }

  /**
   * Caps the database file at about `maxBytes` (null lifts the cap). Writes past it fail with
   * `persistence_failure` exactly like a full disk, and resume once the cap is lifted.
   */
  limitSize(maxBytes: number | null): void {
    const pageSize = this.db.pragma("page_size", { simple: true }) as number;
    const pages = maxBytes === null ? this.defaultMaxPages : Math.max(1, Math.floor(maxBytes / pageSize));
    this.db.pragma(`max_page_count = ${pages}`);
  }

  /**
   * Makes the connection refuse every write with SQLITE_READONLY, as storage that turned
   * read-only does. For fault tests: Linux refuses to remount a file system read-only while the
   * database holds it open for writing, so this is the closest reproducible read-only disk.
   */
  refuseWrites(refuse: boolean): void {
    this.db.pragma(`query_only = ${refuse ? "ON" : "OFF"}`);
  }

  /** `PRAGMA integrity_check`: "ok" when the file is sound. */
  integrityCheck(): string {
    const rows = this.db.pragma("integrity_check") as { integrity_check: string }[];
    return rows.map((row) => row.integrity_check).join("\n");
  }

  /** Settles queued writes, checkpoints the WAL into the main file and closes the connection. */
  close(): Promise<void> {
    this.closed ??= (async () => {
      await this.writes.close();
      try {
        this.db.pragma("wal_checkpoint(TRUNCATE)");
      } finally {
        this.db.close();
        this.lock?.release();
      }
    })();
    return this.closed;
  }

  private stateRow(sessionId: string): SessionStateRow | undefined {
    return this.cache.state(
      sessionId,
      () => this.statements.sessionState.get(sessionId) as SessionStateRow | undefined,
    );
  }

  private missing(sessionId: string): { status: "retired" } | { status: "not_found" } {
    return this.statements.tombstone.get(sessionId) !== undefined
      ? { status: "retired" }
      : { status: "not_found" };
  }

  private read<T>(run: () => T): Promise<T> {
    try {
      return Promise.resolve(run());
    } catch (err) {
      return Promise.reject(isStorageFailure(err) ? persistenceFailure(err) : err);
    }
  }
}
