import { randomBytes } from "node:crypto";
import type pg from "pg";
import type { NewEvent, Resolution, SessionmuxError } from "../../../protocol/index.js";
import { readWhole } from "../attachment-chunks.js";
import { closeEvery } from "../close-every.js";
import type { GlobalCommitListener } from "../commit-listeners.js";
import type { DismissalChange, DismissalOutcome } from "../dismissals.js";
import { FairTurns, type ReadAsker } from "../fair-turns.js";
import type { GroupCommitStats } from "../group-commit.js";
import type {
  EnqueueInput,
  EnqueueOutcome,
  HostStore,
  LiveStateNotice,
  LiveStatePage,
  QueueChangeOutcome,
  QueueEditOutcome,
  ResolveOutcome,
  StoredInteraction,
  StoredQueueItem,
} from "../live-state-store.js";
import type { HeldLease, LeaseHolder, LeaseOutcome, RenewOutcome, SessionLease } from "../session-lease.js";
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
  StoredAttachment,
} from "../session-store.js";
import type { PurgeStep } from "../sqlite-purger.js";
import { assertStorable } from "../storable-data.js";
import { storeClosed } from "../store-closed.js";
import type { PoolStats, StoreMetrics } from "../store-metrics.js";
import type { WriteFailure } from "../write-health.js";
import { PgAttachmentChunks } from "./pg-attachments.js";
import { openWatchedPool, type QueryWatch, queryWatch, watchBackend } from "./pg-backend-watch.js";
import { PgCommitFeed } from "./pg-commit-feed.js";
import { pgDismissals } from "./pg-dismissals.js";
import { pgRead, pgReadChunks } from "./pg-errors.js";
import { PgGroupCommit } from "./pg-group-commit.js";
import { PgLeaseOperations } from "./pg-lease-operations.js";
import { PgLeaseRenewal } from "./pg-lease-renewal.js";
import { PgLiveOperations } from "./pg-live-operations.js";
import { PgLiveReads } from "./pg-live-rows.js";
import { PgLogWriter } from "./pg-log-writer.js";
import { openClient, openPool, poolStatsOf } from "./pg-pool.js";
import { PgPurger } from "./pg-purger.js";
import { readQuery } from "./pg-read-query.js";
import { PgReads } from "./pg-reads.js";
import { MissingSchemaError, migrate, schemaExists } from "./pg-schema.js";
import { PgSchemaFence } from "./pg-schema-fence.js";
import { searchMessages } from "./pg-search.js";
import { searchConnections } from "./pg-search-share.js";
import { SEARCH_STATEMENT_TIMEOUT_MS } from "./pg-search-timeout.js";
import { pgStorageProbe } from "./pg-storage-probe.js";
import { PgWriteOperations } from "./pg-write-operations.js";

const STORE_IDENTITY = `SELECT d.oid::text || '.' || n.oid::text AS id FROM pg_database d, pg_namespace n
  WHERE d.datname = current_database() AND n.nspname = current_schema()`;

export interface PostgresStoreOptions {
  /** Schema holding the tables; created and migrated on open. @default "public" */
  schema?: string;
  /**
   * Pooled connections for reads and lease renewals, of which searches hold at most half (see
   * `searchConnections`); the group commit and LISTEN use one more each. @default 10
   */
  maxConnections?: number;
  /**
   * Create the schema and its tables when they are missing (`serve`, `migrate`); when false the
   * schema must exist already, else `open` fails with `MissingSchemaError` and creates nothing.
   * @default true
   */
  createSchema?: boolean;
  /** Names this host in NOTIFY payloads, so it skips its own. @default random */
  hostId?: string;
  /**
   * What one step of deleting a cleared epoch's or a deleted session's rows may delete (see
   * `PgPurger`). @default PG_PURGE_STEP
   */
  purgeStep?: Partial<PurgeStep>;
  metrics?: StoreMetrics;
  /**
   * How long each statement of a search may run on the database (lock waits included) before the
   * server cancels it and the search fails `overloaded` (see `boundedReadOn`). Other statements
   * run unbounded. @default SEARCH_STATEMENT_TIMEOUT_MS
   */
  searchStatementTimeoutMs?: number;
  /** Clock for `at` of events the store stamps itself. @default Date.now */
  now?: () => number;
  /**
   * How often the LISTEN connection is asked `SELECT 1`, and how long its answer may take: one
   * that goes silent (a half-open network path) is dropped and reconnected as after any outage,
   * within twice this. @default 5000
   */
  listenCheckMs?: number;
  /**
   * How often a write transaction or a read still waiting on the database is checked, on another
   * connection, for whether the server still runs it (see `watchBackend`): a connection whose path
   * went silent is dropped within two or three times this (its writes fail `persistence_failure`),
   * and a new connection's handshake may take twice this. A statement waiting on locks (another
   * host's transaction, `rebuild-projections`) is running: it is never dropped (a search's stops at
   * `searchStatementTimeoutMs`). @default 5000
   */
  queryCheckMs?: number;
  /**
   * The watch the host's other pools on this database share (see `QueryWatch`), in place of one
   * of the store's own every `queryCheckMs`.
   */
  queryWatch?: QueryWatch;
}

/** The read pool's connections when `maxConnections` is not given. */
const DEFAULT_POOL_SIZE = 10;

type WatchWriter = (client: pg.PoolClient) => () => void;

/**
 * Takes the presence lock on the group-commit connection, and reads the schema's entries with it,
 * unless the group commit did on this connection already (a connection holds it until it ends).
 */
async function holdPresenceOn(writerPool: pg.Pool, fence: PgSchemaFence, watch: WatchWriter): Promise<void> {
  const client = await writerPool.connect();
  const unwatch = watch(client);
  try {
    await fence.prepare(client);
  } catch (error) {
    unwatch();
    client.release(error instanceof Error ? error : true);
    throw error;
  }
  unwatch();
  client.release();
}

/**
 * The session store on PostgreSQL: any number of hosts may open one database (one schema). Every
 * rule is enforced by PostgreSQL: contiguous seq by the `(session_id, seq)` key and the session's
 * projection row locked inside each append transaction (the head is the log's own max(seq)),
 * tombstones by the session row that stays, prompt idempotency by a unique key, compare-and-clear
 * by the locked row. Writes are group-committed per host with `synchronous_commit = on`; commit
 * notices reach subscribers on every host (see `PgCommitFeed`).
 */
export class PostgresSessionStore implements HostStore {
  private readonly writeOperations: PgWriteOperations;
  private readonly liveOps: PgLiveOperations;
  private readonly leases: PgLeaseOperations;
  private readonly renewal: PgLeaseRenewal;
  private readonly groupCommit: PgGroupCommit;
  private readonly attachments: PgAttachmentChunks;
  private readonly purger: PgPurger;
  /** The look at open for purges a stopped host left. */
  private readonly purgesFound: Promise<void>;
  private readonly now: () => number;
  private readonly searchStatementTimeoutMs: number;
  /** Searches take the read pool's connections in turns by principal, at most `searchConnections` at once. */
  private readonly searchTurns: FairTurns;
  private closed: Promise<void> | undefined;

  private constructor(
    private readonly pool: pg.Pool,
    private readonly writerPool: pg.Pool,
    private readonly reads: PgReads,
    private readonly feed: PgCommitFeed,
    private readonly liveReads: PgLiveReads,
    private readonly fence: PgSchemaFence,
    watchWriter: WatchWriter,
    options: PostgresStoreOptions,
  ) {
    const writer = new PgLogWriter();
    const now = options.now ?? Date.now;
    this.now = now;
    this.searchStatementTimeoutMs = options.searchStatementTimeoutMs ?? SEARCH_STATEMENT_TIMEOUT_MS;
    this.searchTurns = new FairTurns(searchConnections(options.maxConnections ?? DEFAULT_POOL_SIZE));
    this.attachments = new PgAttachmentChunks(pool);
    this.leases = new PgLeaseOperations(writer);
    this.writeOperations = new PgWriteOperations(writer, this.leases, now);
    this.liveOps = new PgLiveOperations(writer, now);
    this.groupCommit = new PgGroupCommit(
      writerPool,
      {
        announcement: (notices, live) => feed.announcement(notices, live),
        deliver: (notices, live, versionOf) => feed.committed(notices, live, versionOf),
      },
      watchWriter,
      fence,
      options.metrics,
    );
    this.renewal = new PgLeaseRenewal(pool, this.groupCommit.health, fence);
    this.purger = new PgPurger(
      pool,
      options.purgeStep,
      (err) => {
        process.emitWarning(
          `purging a cleared or deleted log failed; retrying: ${err instanceof Error ? err.message : String(err)}`,
        );
      },
      undefined,
      // a purge deletes too: a host whose build the schema moved past leaves it to a newer one
      () => fence.refusal() === undefined,
    );
    // what a clear or a delete left behind on a host that stopped before its purge ended
    this.purgesFound = this.purger.wakeIfPending();
  }

  /**
   * Resolves once this host's purger has nothing left to delete of what the clears and deletes
   * so far left behind (or another host runs what is left, or it stopped on close or a failure).
   */
  async purgesSettled(): Promise<void> {
    await this.purgesFound;
    return this.purger.settled();
  }

  /** Connects, creates and migrates the schema (safe with concurrent openers) and starts listening. */
  static async open(url: string, options: PostgresStoreOptions = {}): Promise<PostgresSessionStore> {
    const schema = options.schema ?? "public";
    const poolOptions = { schema, max: options.maxConnections ?? DEFAULT_POOL_SIZE };
    // every statement of a read, and every transaction of the group commit, is watched while it
    // waits (see `watchBackend`); a handshake, which waits on no lock, is bounded as the watch is
    const watch = options.queryWatch ?? queryWatch(url, options.queryCheckMs);
    const pool = openWatchedPool(url, poolOptions, watch);
    // the group commit's own connection: pipelined, so a transaction takes one or two round trips;
    // never closed while idle, for it holds the host's presence lock (see `pg-host-presence.ts`)
    const writerPool = openPool(url, {
      schema,
      max: 1,
      pipeline: true,
      idleTimeoutMillis: 0,
      connectTimeoutMs: 2 * watch.everyMs,
    });
    // an idle connection that drops must not crash the process: the next query reconnects
    pool.on("error", () => undefined);
    writerPool.on("error", () => undefined);
    const watchWriter: WatchWriter = (client) => watchBackend(client, watch);
    try {
      const client = await pool.connect();
      try {
        if (options.createSchema === false && !(await schemaExists(client, schema)))
          throw new MissingSchemaError(schema);
        await migrate(client, schema);
      } finally {
        client.release();
      }
      const reads = new PgReads(pool);
      const liveReads = new PgLiveReads(pool);
      const hostId = options.hostId ?? randomBytes(6).toString("hex");
      const channel = `sessionmux_${schema}`;
      const fence = new PgSchemaFence(channel);
      const feed = new PgCommitFeed(
        () =>
          openClient(url, "sessionmux-feed", {
            ...poolOptions,
            listenCheckMs: options.listenCheckMs,
          }),
        () => holdPresenceOn(writerPool, fence, watchWriter),
        reads,
        hostId,
        channel,
        liveReads,
      );
      // the lock went with the connection: other hosts may have announced nothing since
      writerPool.on("remove", () => feed.listenAgain());
      await feed.start();
      return new PostgresSessionStore(pool, writerPool, reads, feed, liveReads, fence, watchWriter, options);
    } catch (err) {
      await pool.end().catch(() => undefined);
      await writerPool.end().catch(() => undefined);
      throw err;
    }
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
    return this.groupCommit
      .submit(this.writeOperations.clear(sessionId, options.expectedEpoch))
      .then((outcome) => {
        if (outcome.status === "cleared") this.purger.wake();
        return outcome;
      });
  }

  delete(
    sessionId: string,
  ): Promise<{ status: "deleted" } | { status: "not_found" } | { status: "retired" }> {
    return this.groupCommit.submit(this.writeOperations.delete(sessionId)).then((outcome) => {
      if (outcome.status === "deleted") this.purger.wake();
      return outcome;
    });
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
    return this.groupCommit.submit(
      this.attachments.put(randomBytes(16).toString("base64url"), input, this.now),
    );
  }

  interruptOpenTurns(at: number, options: { hostId?: string } = {}): Promise<string[]> {
    return this.groupCommit.submit(this.writeOperations.interruptOpenTurns(at, options.hostId));
  }

  enqueuePrompt(input: EnqueueInput): Promise<EnqueueOutcome> {
    return this.groupCommit.submit(this.liveOps.enqueue(input));
  }

  editQueueItem(
    sessionId: string,
    itemId: string,
    text: string,
    maxBytesPerOwner?: number,
  ): Promise<QueueEditOutcome> {
    return this.groupCommit.submit(this.liveOps.edit(sessionId, itemId, text, maxBytesPerOwner));
  }

  removeQueueItem(sessionId: string, itemId: string): Promise<QueueChangeOutcome> {
    return this.groupCommit.submit(this.liveOps.remove(sessionId, itemId));
  }

  clearQueue(sessionId: string): Promise<QueueChangeOutcome> {
    return this.groupCommit.submit(this.liveOps.clear(sessionId));
  }

  steerQueueItem(sessionId: string, itemId: string, turnId: string): Promise<QueueChangeOutcome> {
    return this.groupCommit.submit(this.liveOps.steer(sessionId, itemId, turnId));
  }

  queue(sessionId: string): Promise<StoredQueueItem[]> {
    return pgRead(this.liveReads.queue(sessionId));
  }

  queuedBytes(owner: string): Promise<number> {
    return pgRead(this.liveReads.queuedBytes(owner));
  }

  resolveInteraction(interactionId: string, resolution: Resolution, at?: number): Promise<ResolveOutcome> {
    return this.groupCommit.submit(this.liveOps.resolve(interactionId, resolution, at));
  }

  interaction(interactionId: string): Promise<StoredInteraction | null> {
    return pgRead(this.liveReads.interaction(interactionId));
  }

  turnInteractions(sessionId: string, turnId: string): Promise<StoredInteraction[]> {
    return pgRead(this.liveReads.turnInteractions(sessionId, turnId));
  }

  setJobProgress(jobId: string, progress: number): Promise<{ status: "ok" } | { status: "not_found" }> {
    return this.groupCommit.submit(this.liveOps.setJobProgress(jobId, progress));
  }

  liveStatePage(after: string | null, limit: number): Promise<LiveStatePage> {
    return pgRead(this.liveReads.page(after, limit));
  }

  subscribeLive(listener: (notice: LiveStateNotice) => void): () => void {
    return this.feed.subscribeLive(listener);
  }

  acquireLease(sessionId: string, hostId: string, ttlMs: number): Promise<LeaseOutcome> {
    return this.groupCommit.submit(this.leases.acquire(sessionId, hostId, ttlMs));
  }

  /** On a pooled connection, outside the group commit: appends in flight never delay it (see `PgLeaseRenewal`). */
  renewLeases(hostId: string, leases: readonly SessionLease[], ttlMs: number): Promise<RenewOutcome> {
    return this.closed ? Promise.reject(storeClosed()) : this.renewal.renew(hostId, leases, ttlMs);
  }

  releaseLease(lease: SessionLease): Promise<void> {
    return this.groupCommit.submit(this.leases.release(lease));
  }

  leaseHolder(sessionId: string): Promise<LeaseHolder | null> {
    return pgRead(this.liveReads.leaseHolder(sessionId));
  }

  leasePage(after: string | null, limit: number): Promise<{ leases: HeldLease[]; next: string | null }> {
    return pgRead(this.liveReads.leasePage(after, limit));
  }

  unownedQueues(limit: number): Promise<string[]> {
    return pgRead(this.liveReads.unownedQueues(limit));
  }

  rebuildProjections(): Promise<void> {
    return this.groupCommit.submit(this.writeOperations.rebuildProjections());
  }

  header(sessionId: string): Promise<HeaderOutcome> {
    return pgRead(this.reads.header(sessionId));
  }

  projection(sessionId: string): Promise<SessionProjection | null> {
    return pgRead(this.reads.projection(sessionId));
  }

  page(sessionId: string, query: PageQuery): Promise<PageOutcome> {
    return pgRead(this.reads.page(sessionId, query));
  }

  readAfter(sessionId: string, afterSeq: number, limit: number): Promise<ReadOutcome> {
    return pgRead(this.reads.readAfter(sessionId, afterSeq, limit));
  }

  readAfterEncoded(
    sessionId: string,
    afterSeq: number,
    limit: number,
    perArray: number,
    envelope?: Uint8Array,
  ): Promise<EncodedReadOutcome> {
    return pgRead(this.reads.readAfterEncoded(sessionId, afterSeq, limit, perArray, envelope));
  }

  list(query: ListQuery): Promise<{ rows: SessionProjection[]; next?: string }> {
    return pgRead(this.reads.list(query));
  }

  /** Message text search, holding at most `searchConnections` of the read pool's connections at once. */
  search(
    query: string,
    limit: number,
    owner?: string,
    asker?: ReadAsker,
  ): Promise<{ sessionId: string; seq: number; snippet: string }[]> {
    return pgRead(
      searchMessages(this.pool, query, limit, {
        ...(owner !== undefined ? { owner } : {}),
        timeoutMs: this.searchStatementTimeoutMs,
        turns: this.searchTurns,
        ...(asker ? { asker } : {}),
      }),
    );
  }

  dismiss(sessionId: string, principal: string, at: number): Promise<DismissalOutcome> {
    return this.groupCommit.submit(pgDismissals.dismiss(sessionId, principal, at));
  }

  restore(sessionId: string, principal: string): Promise<DismissalOutcome> {
    return this.groupCommit.submit(pgDismissals.restore(sessionId, principal));
  }

  isDismissed(sessionId: string, principal: string): Promise<boolean> {
    return pgRead(pgDismissals.isDismissed(this.pool, sessionId, principal));
  }

  isRetired(sessionId: string): Promise<boolean> {
    return pgRead(this.reads.isRetired(sessionId));
  }

  ownerStoredBytes(owner: string): Promise<number> {
    return pgRead(this.reads.ownerStoredBytes(owner));
  }

  findPrompt(sessionId: string, clientMessageId: string): Promise<PromptRecord | null> {
    return pgRead(this.reads.findPrompt(sessionId, clientMessageId));
  }

  discardAttachment(attachmentId: string): Promise<void> {
    return this.groupCommit.submit(this.attachments.discard(attachmentId));
  }

  async getAttachment(attachmentId: string): Promise<StoredAttachment | null> {
    return readWhole(await this.attachmentInfo(attachmentId), (id) => this.attachmentChunks(id));
  }

  attachmentInfo(attachmentId: string): Promise<AttachmentInfo | null> {
    return pgRead(this.attachments.info(attachmentId));
  }

  attachmentChunks(attachmentId: string): AsyncIterable<Uint8Array> {
    return pgReadChunks(this.attachments.chunks(attachmentId));
  }

  subscribe(sessionId: string, listener: CommitListener): () => void {
    return this.feed.subscribe(sessionId, listener);
  }

  subscribeAll(listener: GlobalCommitListener): () => void {
    return this.feed.subscribeAll(listener);
  }

  subscribeDismissals(
    listener: (change: DismissalChange) => void,
    watched: () => Iterable<string>,
  ): () => void {
    return this.feed.subscribeDismissals(listener, watched);
  }

  rememberDismissals(principal: string): Promise<void> {
    return this.feed.rememberDismissalsOf(principal);
  }

  /** The connections of the store's two pools now: `reads` (sized by `maxConnections`) and the group commit's `writer`. */
  poolStats(): { reads: PoolStats; writer: PoolStats } {
    return { reads: poolStatsOf(this.pool), writer: poolStatsOf(this.writerPool) };
  }

  /** Write-transaction counters; `transactions` grows by one per group commit. */
  stats(): GroupCommitStats {
    return this.groupCommit.stats();
  }

  /** The current run of write transactions that failed on storage; undefined while writes commit. */
  writeFailure(): WriteFailure | undefined {
    return this.groupCommit.health.failing();
  }

  /**
   * Names this database and schema for as long as they exist (their object ids): the same on
   * every host that shares them, another once they were made anew.
   */
  async storeIdentity(): Promise<string> {
    const { rows } = await pgRead(readQuery<{ id: string }>(this.pool, STORE_IDENTITY));
    return `pg:${rows[0]!.id}`;
  }

  /**
   * Why this host may no longer write: the schema holds an entry that needs hosts of its build
   * stopped (see `PgSchemaFence`); undefined while it may. Every write and lease renewal is
   * refused with it meanwhile, and no purge step or upload sweep runs.
   */
  buildOutdated(): SessionmuxError | undefined {
    return this.fence.refusal();
  }

  /**
   * The newest entry of the schema that needs earlier builds stopped, as read elsewhere (`/readyz`
   * reads it with `stoppingVersion`): one past this build refuses every write from now on.
   */
  sawStoppingVersion(version: number): void {
    this.fence.saw(version);
  }

  /** Write transactions committed so far (see `WriteHealth.commits`). */
  writesCommitted(): number {
    return this.groupCommit.health.commits();
  }

  /**
   * A write that needs room and leaves nothing (`pgStorageProbe`): once it commits, `writeFailure`
   * is clear again. Rejects `persistence_failure` while the database still refuses writes.
   */
  probeStorage(): Promise<void> {
    return this.groupCommit.submit(pgStorageProbe());
  }

  /**
   * Settles queued writes, stops listening and closes every connection, each step though one
   * before it failed; rejects with the first failure (`closeEvery`).
   */
  close(): Promise<void> {
    this.closed ??= closeEvery([
      () => this.purger.stop(),
      () => this.groupCommit.close(),
      () => this.feed.close(),
      () => this.writerPool.end(),
      () => this.pool.end(),
    ]);
    return this.closed;
  }
}
