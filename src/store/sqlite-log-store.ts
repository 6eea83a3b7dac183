import { randomBytes } from "node:crypto";
import { resolve } from "node:path";
import type Database from "better-sqlite3";
import type { NewEvent } from "../../protocol/index.js";
import { readWhole, SqliteAttachmentChunks } from "./attachment-chunks.js";
import { AttachmentSweeper } from "./attachment-sweeper.js";
import { CommitListeners, type GlobalCommitListener, type StoreFaultLog } from "./commit-listeners.js";
import type { DatabaseLock } from "./database-lock.js";
import type { DismissalOutcome } from "./dismissals.js";
import type { ReadAsker } from "./fair-turns.js";
import { finalCheckpoint } from "./final-checkpoint.js";
import { GroupCommit, type GroupCommitStats, type WriteOperation } from "./group-commit.js";
import { isStorageFailure, persistenceFailure } from "./io-errors.js";
import { ListQueries } from "./list-query.js";
import { LiveRows } from "./live-rows.js";
import { LiveStateOperations } from "./live-state-operations.js";
import { LogWriter } from "./log-writer.js";
import { ReadCache } from "./read-cache.js";
import type {
  AppendOptions,
  AppendOutcome,
  AttachmentInfo,
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
import { SqliteDismissals } from "./sqlite-dismissals.js";
import { SqliteLeaseOperations } from "./sqlite-lease-operations.js";
import { type PurgeStep, SqlitePurger } from "./sqlite-purger.js";
import { SqliteReadThread } from "./sqlite-read-thread.js";
import { SqliteReads } from "./sqlite-reads.js";
import { prepareStatements, type Statements } from "./sqlite-statements.js";
import { assertStorable } from "./storable-data.js";
import { storageProbe } from "./storage-probe.js";
import type { StoreMetrics } from "./store-metrics.js";
import type { WriteFailure } from "./write-health.js";
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
  /**
   * Sessions whose state (head, header, projection) the writer keeps between transactions, for
   * its writes and reads; past it, the next transaction starts with none kept and reads go to the
   * file until sessions are written again. @default 20_000
   */
  cachedSessions?: number;
  /**
   * What one step of deleting a cleared epoch's or a deleted session's rows may delete (see
   * `SqlitePurger`). @default DEFAULT_PURGE_STEP
   */
  purgeStep?: Partial<PurgeStep>;
}

/**
 * The log half of the embedded durable store (the live state and leases are added by
 * `SqliteSessionStore`): one better-sqlite3 connection in WAL mode with
 * `synchronous=FULL`, group-committed writes (see `GroupCommit`) and synchronous reads.
 */
export class SqliteLogStore implements SessionStore {
  protected readonly statements: Statements;
  protected readonly logWriter: LogWriter;
  protected readonly groupCommit: GroupCommit;
  protected readonly writeOperations: WriteOperations;
  protected readonly liveRows: LiveRows;
  protected readonly liveOps: LiveStateOperations;
  protected readonly leases: SqliteLeaseOperations;
  protected readonly reads: SqliteReads;
  /** Where searches run, off the event loop (none in memory or read-only). */
  private readonly readThread: SqliteReadThread | undefined;
  protected readonly dismissals: SqliteDismissals;
  protected readonly attachments: SqliteAttachmentChunks;
  private readonly purger: SqlitePurger;
  protected readonly now: () => number;
  protected readonly listeners: CommitListeners;
  protected readonly cache = new ReadCache();
  protected readonly defaultMaxPages: number;
  private probe: WriteOperation<void> | undefined;
  private readonly faultLog: StoreFaultLog | undefined;
  private closed: Promise<void> | undefined;
  /** Read-only: commits come from another connection, and only `data_version` tells of them. */
  private readonly readOnly: boolean;
  /** The `data_version` the read cache was last checked at. */
  private dataVersion = -1;

  protected constructor(
    protected readonly db: Database.Database,
    options: SqliteStoreOptions,
    protected readonly lock?: DatabaseLock,
  ) {
    this.readOnly = options.readOnly === true;
    this.faultLog = options.logger;
    this.listeners = new CommitListeners(options.logger, () => options.metrics?.listenerFailed?.());
    this.statements = prepareStatements(db);
    this.liveRows = new LiveRows(this.statements);
    this.logWriter = new LogWriter(this.statements, this.liveRows, options.cachedSessions);
    const now = options.now ?? Date.now;
    this.now = now;
    this.leases = new SqliteLeaseOperations(this.logWriter, this.statements, now);
    this.writeOperations = new WriteOperations(
      this.logWriter,
      this.statements,
      this.liveRows,
      this.leases,
      now,
    );
    this.liveOps = new LiveStateOperations(this.logWriter, this.liveRows, this.statements, now);
    // a read-only instance is a tool's, beside a host, and searches rarely: on its own event loop
    this.readThread = this.readOnly || db.memory ? undefined : new SqliteReadThread(resolve(db.name));
    this.reads = new SqliteReads(
      this.statements,
      new ListQueries(db),
      this.cache,
      (sessionId) => this.logWriter.committed(sessionId),
      this.readThread,
    );
    this.dismissals = new SqliteDismissals(db);
    this.attachments = new SqliteAttachmentChunks(db);
    this.defaultMaxPages = db.pragma("max_page_count", { simple: true }) as number;
    this.groupCommit = new GroupCommit(
      db,
      {
        beforeTransaction: () => this.logWriter.trimCache(),
        finishTransaction: (batch) => {
          this.cache.clear();
          this.logWriter.writeBack(batch);
        },
        afterRollback: () => {
          this.cache.clear();
          this.logWriter.dropCache();
        },
        deliver: (batch) => {
          if (batch.purges > 0) this.purger.wake();
          this.listeners.deliver(batch.notices, batch.liveNotices);
        },
      },
      options.metrics,
    );
    this.purger = new SqlitePurger(
      db,
      (op) => this.groupCommit.submit(op),
      options.purgeStep,
      (err) => {
        const msg = "purging a cleared or deleted log failed; retrying";
        if (this.faultLog) this.faultLog.error({ err }, msg);
        else process.emitWarning(`${msg}: ${err instanceof Error ? err.message : String(err)}`);
      },
    );
    // what a clear or a delete before a crash or a close left behind
    if (!this.readOnly && db.prepare("SELECT 1 FROM purges LIMIT 1").get() !== undefined) this.purger.wake();
  }

  /**
   * Resolves once the purger has nothing left to delete of what the clears and deletes so far
   * left behind (or stopped, on close or a failed step).
   */
  purgesSettled(): Promise<void> {
    return this.purger.settled();
  }

  create(input: CreateInput): Promise<CreateOutcome> {
    return this.groupCommit.submit(this.writeOperations.create(input));
  }

  fork(input: ForkInput): Promise<ForkOutcome> {
    return this.groupCommit.submit(this.writeOperations.fork(input));
  }

  append<O extends AppendOptions = Record<never, never>>(
    sessionId: string,
    events: NewEvent[],
    options?: O,
  ): Promise<AppendOutcome<O>> {
    try {
      assertStorable(events);
    } catch (err) {
      return Promise.reject(err);
    }
    // the operation answers a refusal only for an option given (see `AppendOutcome`)
    return this.groupCommit.submit(this.writeOperations.append(sessionId, events, options)) as Promise<
      AppendOutcome<O>
    >;
  }

  clear(sessionId: string, options: { expectedEpoch?: string; at?: number } = {}): Promise<ClearOutcome> {
    return this.groupCommit.submit(this.writeOperations.clear(sessionId, options.expectedEpoch));
  }

  delete(
    sessionId: string,
  ): Promise<{ status: "deleted" } | { status: "not_found" } | { status: "retired" }> {
    return this.groupCommit.submit(this.writeOperations.delete(sessionId));
  }

  ack(
    sessionId: string,
    completionSettledAt: number,
  ): Promise<{ status: "ok"; hasUnseenCompletion: boolean } | { status: "not_found" }> {
    return this.groupCommit.submit(this.writeOperations.ack(sessionId, completionSettledAt));
  }

  recordPrompt(sessionId: string, clientMessageId: string, result: PromptRecord): Promise<void> {
    return this.groupCommit.submit(this.writeOperations.recordPrompt(sessionId, clientMessageId, result));
  }

  putAttachment(input: { owner: string; name: string; type: string; bytes: Uint8Array }): Promise<string> {
    return this.attachments.put(randomBytes(16).toString("base64url"), input, this.now(), (op) =>
      this.groupCommit.submit(op),
    );
  }

  interruptOpenTurns(at: number, options: { hostId?: string } = {}): Promise<string[]> {
    return this.groupCommit.submit(this.writeOperations.interruptOpenTurns(at, options.hostId));
  }

  rebuildProjections(): Promise<void> {
    return this.groupCommit.submit(this.writeOperations.rebuildProjections());
  }

  header(sessionId: string): Promise<HeaderOutcome> {
    return this.read(() => this.reads.header(sessionId));
  }

  projection(sessionId: string): Promise<SessionProjection | null> {
    return this.read(() => this.reads.projection(sessionId));
  }

  /** Ascending events; no cursor = the newest `limit` (the tail). */
  page(sessionId: string, query: PageQuery): Promise<PageOutcome> {
    return this.read(() => this.reads.page(sessionId, query));
  }

  readAfter(sessionId: string, afterSeq: number, limit: number): Promise<ReadOutcome> {
    return this.read(() => this.reads.readAfter(sessionId, afterSeq, limit));
  }

  readAfterEncoded(
    sessionId: string,
    afterSeq: number,
    limit: number,
    perArray: number,
    envelope?: Uint8Array,
  ): Promise<EncodedReadOutcome> {
    return this.read(() => this.reads.readAfterEncoded(sessionId, afterSeq, limit, perArray, envelope));
  }

  list(query: ListQuery): Promise<{ rows: SessionProjection[]; next?: string }> {
    return this.read(() => this.reads.list(query));
  }

  /**
   * Message text search; any input is safe (see `toFtsQuery`). Snippets mark hits with `**`. Its
   * statements take their turns on the read thread by `asker` (see `SqliteReadThread`).
   */
  async search(
    query: string,
    limit: number,
    owner?: string,
    asker?: ReadAsker,
  ): Promise<{ sessionId: string; seq: number; snippet: string }[]> {
    try {
      return await this.reads.search(query, limit, owner, asker);
    } catch (err) {
      throw isStorageFailure(err) ? persistenceFailure(err) : err;
    }
  }

  isRetired(sessionId: string): Promise<boolean> {
    return this.read(() => this.reads.isRetired(sessionId));
  }

  ownerStoredBytes(owner: string): Promise<number> {
    return this.read(() => this.reads.ownerStoredBytes(owner));
  }

  dismiss(sessionId: string, principal: string, at: number): Promise<DismissalOutcome> {
    return this.groupCommit.submit(this.dismissals.dismiss(sessionId, principal, at));
  }

  restore(sessionId: string, principal: string): Promise<DismissalOutcome> {
    return this.groupCommit.submit(this.dismissals.restore(sessionId, principal));
  }

  isDismissed(sessionId: string, principal: string): Promise<boolean> {
    return this.read(() => this.dismissals.isDismissed(sessionId, principal));
  }

  findPrompt(sessionId: string, clientMessageId: string): Promise<PromptRecord | null> {
    return this.read(() => this.reads.findPrompt(sessionId, clientMessageId));
  }

  discardAttachment(attachmentId: string): Promise<void> {
    return this.groupCommit.submit(this.attachments.discard(attachmentId));
  }

  getAttachment(attachmentId: string): Promise<StoredAttachment | null> {
    return this.attachmentInfo(attachmentId).then((info) =>
      readWhole(info, (id) => this.attachments.chunks(id)),
    );
  }

  attachmentInfo(attachmentId: string): Promise<AttachmentInfo | null> {
    return this.attachments.info(attachmentId);
  }

  attachmentChunks(attachmentId: string): AsyncIterable<Uint8Array> {
    return this.attachments.chunks(attachmentId);
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
    return this.groupCommit.stats();
  }

  /** The current run of write transactions that failed on storage; undefined while writes commit. */
  writeFailure(): WriteFailure | undefined {
    return this.groupCommit.health.failing();
  }

  /** Write transactions committed so far (see `WriteHealth.commits`). */
  writesCommitted(): number {
    return this.groupCommit.health.commits();
  }

  /**
   * A write that needs room and leaves nothing (`storageProbe`): once it commits, `writeFailure`
   * is clear again. Rejects `persistence_failure` while storage still refuses writes.
   */
  probeStorage(): Promise<void> {
    this.probe ??= storageProbe(this.db);
    return this.groupCommit.submit(this.probe);
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

  /**
   * Settles queued writes, checkpoints the WAL into the main file and closes the connection. A
   * checkpoint storage refuses (a full disk) is only a warning: the WAL keeps every commit.
   */
  close(): Promise<void> {
    this.closed ??= (async () => {
      this.purger.stop();
      await this.groupCommit.close();
      // its connection would keep the final checkpoint from emptying the WAL
      await this.readThread?.close();
      try {
        finalCheckpoint(this.db, this.faultLog);
      } finally {
        this.db.close();
        this.lock?.release();
      }
    })();
    return this.closed;
  }

  protected read<T>(run: () => T): Promise<T> {
    try {
      if (this.readOnly) this.forgetOtherCommits();
      return Promise.resolve(run());
    } catch (err) {
      return Promise.reject(isStorageFailure(err) ? persistenceFailure(err) : err);
    }
  }

  /**
   * A read-only instance runs no transaction of its own to clear its read cache at: the writer's
   * commits change `data_version` instead, and a cache filled before one holds what it replaced.
   */
  private forgetOtherCommits(): void {
    const version = this.db.pragma("data_version", { simple: true }) as number;
    if (version !== this.dataVersion) this.cache.clear();
    this.dataVersion = version;
  }
}
