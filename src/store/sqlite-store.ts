import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import Database from "better-sqlite3";
import type { Resolution } from "../../protocol/index.js";
import { DatabaseLock } from "./database-lock.js";
import { keepingWal } from "./kept-wal.js";
import type {
  EnqueueInput,
  EnqueueOutcome,
  LiveStateNotice,
  LiveStatePage,
  LiveStateStore,
  QueueChangeOutcome,
  QueueEditOutcome,
  ResolveOutcome,
  StoredInteraction,
  StoredQueueItem,
} from "./live-state-store.js";
import { migrate, type SchemaMigration, schemaVersionOf } from "./migrations.js";
import type {
  HeldLease,
  LeaseHolder,
  LeaseOutcome,
  RenewOutcome,
  SessionLease,
  SessionLeaseStore,
} from "./session-lease.js";
import { SqliteLogStore, type SqliteStoreOptions } from "./sqlite-log-store.js";

export type { SqliteStoreOptions } from "./sqlite-log-store.js";

/** WAL pages between automatic checkpoints (see `open`); the benchmarks' raw SQLite uses it too. */
export const WAL_CHECKPOINT_PAGES = 8192;

/**
 * The embedded durable store: one better-sqlite3 connection in WAL mode with
 * `synchronous=FULL`, group-committed writes (see `GroupCommit`) and synchronous reads.
 */
export class SqliteSessionStore extends SqliteLogStore implements LiveStateStore, SessionLeaseStore {
  /** The schema versions this open found and left the file at (the same when read-only). */
  readonly schemaMigration: SchemaMigration;

  private constructor(
    db: Database.Database,
    options: SqliteStoreOptions,
    schemaMigration: SchemaMigration,
    lock?: DatabaseLock,
  ) {
    super(db, options, lock);
    this.schemaMigration = schemaMigration;
  }

  /** Opens (creating the folder and file if missing) and migrates the database at `path`. */
  static open(path: string, options: SqliteStoreOptions = {}): SqliteSessionStore {
    if (path !== ":memory:") mkdirSync(dirname(path), { recursive: true });
    const readOnly = options.readOnly === true;
    const lock = path === ":memory:" || readOnly ? undefined : DatabaseLock.acquire(path);
    let db: Database.Database;
    try {
      // Only the first read may fail to take in the WAL. Once it read the file, a later failure's
      // close folds the WAL into it, with whatever a migration committed since: the copy from
      // before the open put back then would replay older pages over newer ones.
      db = keepingWal(path, () => {
        const conn = new Database(path);
        try {
          schemaVersionOf(conn);
          return conn;
        } catch (err) {
          conn.close();
          throw err;
        }
      });
    } catch (err) {
      // released once the WAL is back: another opener never finds the file without it
      lock?.release();
      throw err;
    }
    return SqliteSessionStore.#openRead(db, options, lock);
  }

  static #openRead(db: Database.Database, options: SqliteStoreOptions, lock: DatabaseLock | undefined) {
    const readOnly = options.readOnly === true;
    try {
      if (readOnly) {
        db.pragma("query_only = ON");
        db.pragma("busy_timeout = 5000");
        const version = schemaVersionOf(db);
        return new SqliteSessionStore(db, options, { from: version, to: version });
      }
      // Takes effect only on a new file, and only before WAL mode writes its header: pages freed by
      // deletes (expired uploads) can then be given back to the file system (AttachmentSweeper).
      // An older file keeps auto_vacuum off and reuses freed pages instead.
      db.pragma("auto_vacuum = INCREMENTAL");
      db.pragma("journal_mode = WAL");
      // an acknowledged append must survive power loss, not only a process crash
      db.pragma("synchronous = FULL");
      // A checkpoint copies every page the WAL holds back into the file and fsyncs it. With many
      // sessions each commit rewrites the same hot pages (the sessions' last log pages and their
      // projection rows), so checkpointing every 8,192 pages (32 MiB at 4 KiB) instead of SQLite's
      // 1,000 copies a hot page once per many commits; the WAL file grows to about that size.
      db.pragma(`wal_autocheckpoint = ${WAL_CHECKPOINT_PAGES}`);
      db.pragma("foreign_keys = OFF");
      db.pragma("busy_timeout = 5000");
      const migration = migrate(db);
      return new SqliteSessionStore(db, options, migration, lock);
    } catch (err) {
      db.close();
      lock?.release();
      throw err;
    }
  }

  acquireLease(sessionId: string, hostId: string, ttlMs: number): Promise<LeaseOutcome> {
    return this.groupCommit.submit(this.leases.acquire(sessionId, hostId, ttlMs));
  }

  renewLeases(hostId: string, leases: readonly SessionLease[], ttlMs: number): Promise<RenewOutcome> {
    return this.groupCommit.submit(this.leases.renew(hostId, leases, ttlMs));
  }

  releaseLease(lease: SessionLease): Promise<void> {
    return this.groupCommit.submit(this.leases.release(lease));
  }

  leaseHolder(sessionId: string): Promise<LeaseHolder | null> {
    return this.read(() => this.leases.holder(sessionId));
  }

  leasePage(after: string | null, limit: number): Promise<{ leases: HeldLease[]; next: string | null }> {
    return this.read(() => this.leases.page(after, limit));
  }

  unownedQueues(limit: number): Promise<string[]> {
    return this.read(() => this.leases.unownedQueues(limit));
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
    return this.read(() => this.liveRows.queue(sessionId));
  }

  queuedBytes(owner: string): Promise<number> {
    return this.read(() => this.statements.queuedBytesOfOwner.get(owner) as number);
  }

  resolveInteraction(interactionId: string, resolution: Resolution, at?: number): Promise<ResolveOutcome> {
    return this.groupCommit.submit(this.liveOps.resolve(interactionId, resolution, at));
  }

  interaction(interactionId: string): Promise<StoredInteraction | null> {
    return this.read(() => this.liveRows.interaction(interactionId) ?? null);
  }

  turnInteractions(sessionId: string, turnId: string): Promise<StoredInteraction[]> {
    return this.read(() => this.liveRows.turnInteractions(sessionId, turnId));
  }

  setJobProgress(jobId: string, progress: number): Promise<{ status: "ok" } | { status: "not_found" }> {
    return this.groupCommit.submit(this.writeOperations.setJobProgress(jobId, progress));
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
}
