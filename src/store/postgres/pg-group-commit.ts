import type pg from "pg";
import type { GroupCommitStats } from "../group-commit.js";
import { storeClosed } from "../store-closed.js";
import type { StoreMetrics } from "../store-metrics.js";
import type { PendingNotice } from "../write-batch.js";
import { WriteHealth } from "../write-health.js";
import { isPgRetryable, isPgStorageFailure, isStaleKeptState, pgPersistenceFailure } from "./pg-errors.js";
import { handedOut, idleLostTries, lostWhileIdle } from "./pg-idle-lost.js";
import type { PgSchemaFence } from "./pg-schema-fence.js";
import { PgSessionCache } from "./pg-session-cache.js";
import {
  type Announcement,
  KeptStatesInsufficient,
  type PgLiveNotice,
  PgWriteBatch,
} from "./pg-write-batch.js";
import type { PgWriteOperation } from "./pg-write-operations.js";

interface Queued {
  op: PgWriteOperation<unknown>;
  resolve(value: unknown): void;
  reject(err: unknown): void;
}

export interface PgGroupCommitHooks {
  /** The NOTIFY telling other hosts what the batch changed (null: nothing to tell). */
  announcement(notices: readonly PendingNotice[], liveNotices: readonly PgLiveNotice[]): Announcement | null;
  /**
   * Delivers notices synchronously after COMMIT, in commit order; `versionOf` answers the version
   * each session's projection row has now (see `PgWriteBatch.rowVersion`).
   */
  deliver(
    notices: readonly PendingNotice[],
    liveNotices: readonly PgLiveNotice[],
    versionOf: (sessionId: string) => number | undefined,
  ): void;
}

/** A transaction that lost a lock race (deadlock across hosts) is run again this many times. */
const RACE_RETRIES = 3;

/**
 * The longest a connection may have idled since its last answer for a batch on kept states to go
 * out on it. Such a batch sends its COMMIT before anything of it is answered, so on a connection
 * that died while idle (a blip) its outcome would be unknown, and it could not be run again; a
 * batch on a connection idle longer goes the usual way, whose COMMIT waits for the first round
 * trip, so a connection found dead there has committed nothing and the batch runs again on the
 * next one. Back-to-back batches (a host under write load) keep the one round trip.
 */
export const KEPT_AFTER_IDLE_MS = 1_000;

/**
 * Group commit per host: one transaction at a time on one pipelined connection (a pool of one, so
 * a broken connection is replaced); every write queued while it runs joins the next one, so the
 * batch grows with the load. A batch of appends to sessions whose state this host kept from its
 * own last commits waits for one round trip: BEGIN and the locks are sent as it starts (PostgreSQL
 * takes them while the operations run here), then the database's check that the kept rows were not
 * written since (and that fences hold), the rows, COMMIT and the NOTIFY for other hosts.
 * If the check fails, or an operation needs a read first, it runs the usual way, in two round
 * trips: BEGIN with the locks and reads, then the rows, COMMIT and the NOTIFY. Each caller's
 * promise settles only after COMMIT returned (with `synchronous_commit = on`: the WAL is on disk;
 * the NOTIFY behind it is not waited for) and after the notices went out. Expected refusals are
 * result values, so one refused write never fails the others; a storage failure fails every caller
 * with `persistence_failure`, unless it was a connection that died while idle under a transaction
 * whose COMMIT never went out, which runs again on the next one; any other fault re-runs the
 * operations one per transaction so only the faulty one fails.
 */
export class PgGroupCommit {
  private queue: Queued[] = [];
  private running: Promise<void> | undefined;
  private closed = false;
  private readonly counters: GroupCommitStats = { transactions: 0, operations: 0, rollbacks: 0 };
  /** Whether the latest transaction failed on storage (a full disk, a read-only database, no connection). */
  readonly health = new WriteHealth(isPgStorageFailure);
  /** The connection the latest transaction was answered on, and when (see `KEPT_AFTER_IDLE_MS`). */
  private answered: { client: pg.PoolClient; at: number } | undefined;

  constructor(
    private readonly pool: pg.Pool,
    private readonly hooks: PgGroupCommitHooks,
    /**
     * Watches the connection while a transaction runs on it, until the function returned is called
     * (see `watchBackend`): one whose path went silent has its socket destroyed, so the transaction
     * fails as on a closed connection.
     */
    private readonly watch: (client: pg.PoolClient) => () => void,
    /** Holds every write until its connection holds presence and its build may still write. */
    private readonly fence: PgSchemaFence,
    private readonly metrics?: StoreMetrics,
    /** Session states kept between transactions (see `PgSessionCache`). */
    private readonly kept = new PgSessionCache(),
  ) {}

  submit<R>(op: PgWriteOperation<R>): Promise<R> {
    if (this.closed) {
      return Promise.reject(storeClosed());
    }
    const refused = this.fence.refusal();
    if (refused) return Promise.reject(refused);
    return new Promise<R>((resolve, reject) => {
      this.queue.push({ op, resolve: resolve as (value: unknown) => void, reject });
      if (!this.running) {
        // let every write issued in this tick join the first batch
        this.running = new Promise<void>((done) => setImmediate(done)).then(() => this.drain());
      }
    });
  }

  stats(): GroupCommitStats {
    return { ...this.counters };
  }

  /** Stops accepting writes and resolves once everything queued has settled. */
  async close(): Promise<void> {
    this.closed = true;
    while (this.running) await this.running;
  }

  private async drain(): Promise<void> {
    try {
      while (this.queue.length > 0) {
        const ops = this.queue;
        this.queue = [];
        const settled = await this.commit(ops);
        if (!settled) for (const op of ops) await this.commit([op]);
      }
    } finally {
      this.running = undefined;
    }
  }

  /**
   * Returns false when the batch should be retried one operation at a time. `tried`: the
   * connections that died while idle under this batch so far, and one (see `idleLostTries`).
   */
  private async commit(ops: Queued[], attempt = 0, tried = 1): Promise<boolean> {
    const started = performance.now();
    let client: pg.PoolClient;
    try {
      client = await this.pool.connect();
    } catch (err) {
      this.health.failed(err);
      for (const op of ops) op.reject(pgPersistenceFailure(err));
      return true;
    }
    // asked before the release, which counts as going back to the pool
    const handed = handedOut(client);
    const unwatch = this.watch(client);
    if (!(await this.fenced(client, unwatch, ops))) return true;
    const sessionIds = ops.flatMap(({ op }) => op.sessions);
    let batch: PgWriteBatch | undefined;
    let results: unknown[] = [];
    try {
      const kept =
        this.answeredLately(client) && ops.every(({ op }) => op.keptStates)
          ? this.kept.take(sessionIds)
          : null;
      if (kept) {
        batch = new PgWriteBatch(client);
        batch.beginKept(kept);
        const ran = await this.run(batch, ops).catch((err: unknown) => {
          if (err instanceof KeptStatesInsufficient || isStaleKeptState(err)) return null;
          throw err;
        });
        if (ran) results = ran;
        else {
          // nothing of it was written (and the states taken out stay out): the usual way reads the
          // rows as they are now
          await batch.abandon();
          batch = undefined;
        }
      }
      if (!batch) {
        batch = new PgWriteBatch(client);
        await batch.begin(sessionIds);
        results = await this.run(batch, ops);
      }
    } catch (err) {
      this.counters.rollbacks++;
      // whatever the failure left in the rows is read again
      this.kept.clear();
      const storage = isPgStorageFailure(err);
      // A connection that died while idle (a blip), under a transaction whose COMMIT never went
      // out: nothing of it can commit (see `PgWriteBatch.commitSent`), so it runs again, whole, on
      // the next connection. The group commit's connection is pipelined, so statements after the
      // first go out before it is answered: its COMMIT waits for the first round trip on the usual
      // way only, which is why a batch on kept states goes out only on a connection answered
      // lately. Not after a COMMIT was sent: the server may have committed it before the
      // connection was lost, and a second run would write it twice.
      const again = tried < idleLostTries(this.pool) && !batch?.commitSent && lostWhileIdle(handed, err);
      if (!again) this.health.failed(err);
      // a connection lost mid-COMMIT (closed, or destroyed by the watch) leaves the outcome
      // unknown: the callers get the retryable `persistence_failure`, the kept states are gone
      // above, and the pool's `remove` has the feed read again what its subscribers follow
      if (storage) {
        unwatch();
        client.release(err instanceof Error ? err : true);
      } else {
        if (batch?.open) await client.query("ROLLBACK").catch(() => undefined);
        unwatch();
        this.answered = { client, at: performance.now() };
        client.release();
      }
      if (again) return this.commit(ops, attempt, tried + 1);
      if (isPgRetryable(err) && attempt < RACE_RETRIES) return this.commit(ops, attempt + 1);
      if (ops.length > 1 && !storage) return false;
      const failure = storage ? pgPersistenceFailure(err) : err;
      for (const op of ops) op.reject(failure);
      return true;
    }
    unwatch();
    this.answered = { client, at: performance.now() };
    client.release();
    this.health.committed();
    const committed = batch.committedStates();
    for (const [state, version] of committed.states) this.kept.keep(state, version);
    this.kept.forget(committed.gone);
    this.counters.transactions++;
    this.counters.operations += ops.length;
    this.metrics?.committed((performance.now() - started) / 1000, batch.appendedEvents);
    const written = batch;
    this.hooks.deliver(batch.notices, batch.liveNotices, (sessionId) => written.rowVersion(sessionId));
    for (let i = 0; i < ops.length; i++) ops[i]!.resolve(results[i]);
    return true;
  }

  /**
   * Whether the batch may go out on `client`: on a connection new to it, the fence takes presence
   * and reads the schema's entries first (see `PgSchemaFence`). False once the batch was answered:
   * refused by the fence, or failed as any write whose connection failed.
   */
  private async fenced(client: pg.PoolClient, unwatch: () => void, ops: Queued[]): Promise<boolean> {
    try {
      await this.fence.prepare(client);
    } catch (err) {
      unwatch();
      client.release(err instanceof Error ? err : true);
      this.health.failed(err);
      for (const op of ops) op.reject(pgPersistenceFailure(err));
      return false;
    }
    const refused = this.fence.refusal();
    if (!refused) return true;
    unwatch();
    client.release();
    for (const op of ops) op.reject(refused);
    return false;
  }

  /** Whether the latest transaction was answered on `client`, and `KEPT_AFTER_IDLE_MS` has not passed since. */
  private answeredLately(client: pg.PoolClient): boolean {
    const { answered } = this;
    return answered?.client === client && performance.now() - answered.at < KEPT_AFTER_IDLE_MS;
  }

  /** Runs the operations in the batch and commits it; the results in operation order. */
  private async run(batch: PgWriteBatch, ops: Queued[]): Promise<unknown[]> {
    const results: unknown[] = [];
    for (const { op } of ops) results.push(await op.run(batch));
    await batch.commit(() => this.hooks.announcement(batch.notices, batch.liveNotices));
    return results;
  }
}
