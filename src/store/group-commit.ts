import type Database from "better-sqlite3";
import { isStorageFailure, persistenceFailure } from "./io-errors.js";
import { storeClosed } from "./store-closed.js";
import type { StoreMetrics } from "./store-metrics.js";
import { WriteBatch } from "./write-batch.js";
import { WriteHealth } from "./write-health.js";

/** One write: runs synchronously inside the shared transaction and returns its outcome. */
export type WriteOperation<R> = (batch: WriteBatch) => R;

interface Queued {
  run: WriteOperation<unknown>;
  resolve(value: unknown): void;
  reject(err: unknown): void;
}

export interface GroupCommitHooks {
  /** Called before each transaction (never inside one). */
  beforeTransaction(): void;
  /** Last step inside each transaction: write back what the operations touched. */
  finishTransaction(batch: WriteBatch): void;
  /** After a failed transaction: forget in-memory state so it is reloaded from disk. */
  afterRollback(): void;
  /** Delivers notices synchronously after COMMIT, in commit order. */
  deliver(batch: WriteBatch): void;
}

export interface GroupCommitStats {
  /** Committed write transactions. */
  transactions: number;
  /** Write operations that committed. */
  operations: number;
  /** Transactions rolled back. */
  rollbacks: number;
}

/**
 * Group commit: every write queued in the same tick shares one `BEGIN IMMEDIATE` transaction,
 * flushed on `setImmediate`; each caller's promise settles only after COMMIT (and after the
 * notices went out). Expected refusals are result values computed inside the transaction, so one
 * refused write never fails the others. If the transaction fails on storage (full disk, read-only,
 * I/O), every caller gets `persistence_failure`; any other fault re-runs the operations one per
 * transaction so only the faulty one fails.
 */
export class GroupCommit {
  private queue: Queued[] = [];
  private scheduled = false;
  private closed = false;
  private readonly counters: GroupCommitStats = { transactions: 0, operations: 0, rollbacks: 0 };
  private drainWaiters: (() => void)[] = [];
  /** Whether the latest transaction failed on storage. */
  readonly health = new WriteHealth();
  private readonly transaction: Database.Transaction<
    (ops: Queued[], batch: WriteBatch, results: unknown[]) => void
  >;

  constructor(
    db: Database.Database,
    private readonly hooks: GroupCommitHooks,
    private readonly metrics?: StoreMetrics,
  ) {
    this.transaction = db.transaction((ops: Queued[], batch: WriteBatch, results: unknown[]) => {
      for (const op of ops) results.push(op.run(batch));
      this.hooks.finishTransaction(batch);
    });
  }

  submit<R>(run: WriteOperation<R>): Promise<R> {
    if (this.closed) {
      return Promise.reject(storeClosed());
    }
    return new Promise<R>((resolve, reject) => {
      this.queue.push({ run, resolve: resolve as (value: unknown) => void, reject });
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  stats(): GroupCommitStats {
    return { ...this.counters };
  }

  /** Stops accepting writes and resolves once everything queued has settled. */
  async close(): Promise<void> {
    this.closed = true;
    if (!this.scheduled && this.queue.length === 0) return;
    await new Promise<void>((resolve) => this.drainWaiters.push(resolve));
  }

  private flush(): void {
    this.scheduled = false;
    const ops = this.queue;
    this.queue = [];
    if (ops.length > 0) {
      const settled = this.commit(ops);
      if (!settled) for (const op of ops) this.commit([op]);
    }
    if (this.queue.length === 0 && !this.scheduled) {
      const waiters = this.drainWaiters;
      this.drainWaiters = [];
      for (const resolve of waiters) resolve();
    }
  }

  /** Returns false when the batch should be retried one operation at a time. */
  private commit(ops: Queued[]): boolean {
    this.hooks.beforeTransaction();
    const batch = new WriteBatch();
    const results: unknown[] = [];
    const started = performance.now();
    try {
      this.transaction.immediate(ops, batch, results);
    } catch (err) {
      this.counters.rollbacks++;
      this.hooks.afterRollback();
      this.health.failed(err);
      if (ops.length > 1 && !isStorageFailure(err)) return false;
      const failure = isStorageFailure(err) ? persistenceFailure(err) : err;
      for (const op of ops) op.reject(failure);
      return true;
    }
    this.counters.transactions++;
    this.health.committed();
    this.counters.operations += ops.length;
    this.metrics?.committed((performance.now() - started) / 1000, batch.appendedEvents);
    this.hooks.deliver(batch);
    for (let i = 0; i < ops.length; i++) ops[i]!.resolve(results[i]);
    return true;
  }
}
