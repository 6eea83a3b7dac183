import { checkTtl, decideAcquire, type LeaseRow, leaseIsCurrent } from "../lease-rules.js";
import type { TimedEvent } from "../log-writer.js";
import type { LeaseOutcome, SessionLease } from "../session-lease.js";
import type { SessionState } from "../session-state.js";
import { DB_NOW, PENDING_IN_TURN, RUNNING_JOBS_OF } from "./pg-live-rows.js";
import type { PgLogWriter } from "./pg-log-writer.js";
import type { LeaseReading, PgWriteBatch } from "./pg-write-batch.js";
import type { PgWriteOperation } from "./pg-write-operations.js";

/** The lease row and the database clock, in one statement. */
const LEASE_ROW = `SELECT n.now, l.host_id AS "hostId", l.generation, l.expires_at AS "expiresAt"
  FROM (SELECT ${DB_NOW} AS now) n LEFT JOIN leases l ON l.session_id = $1`;
const UPSERT = `INSERT INTO leases (session_id, host_id, generation, expires_at) VALUES ($1, $2, $3, $4)
  ON CONFLICT (session_id) DO UPDATE SET host_id = excluded.host_id, generation = excluded.generation,
    expires_at = excluded.expires_at`;
const RELEASE = `UPDATE leases l SET host_id = NULL FROM projections p
  WHERE l.session_id = $1 AND l.host_id = $2 AND l.generation = $3 AND p.session_id = l.session_id
  RETURNING p.owner`;

/**
 * The session's lease row inside the transaction (the caller holds the session's lock): the one
 * the batch read with the lock, or, with `lock` or after this transaction wrote it, from the table.
 */
export async function readLease(batch: PgWriteBatch, sessionId: string, lock = false): Promise<LeaseReading> {
  const kept = lock ? undefined : batch.lease(sessionId);
  if (kept) return kept;
  // waits for a renewal in flight, so the row read next is the one it committed
  if (lock) await batch.read("SELECT 1 FROM leases WHERE session_id = $1 FOR UPDATE", [sessionId]);
  const found = (await batch.read<{ now: number } & LeaseRow>(LEASE_ROW, [sessionId]))[0]!;
  const row = found.generation === null ? undefined : found;
  return { now: found.now, row };
}

/** Whether `lease` is the session's current lease (the caller holds the session's lock). */
export async function fenceHolds(
  batch: PgWriteBatch,
  sessionId: string,
  lease: SessionLease,
): Promise<boolean> {
  if (batch.expectLease(sessionId, lease)) return true;
  const { now, row } = await readLease(batch, sessionId);
  return leaseIsCurrent(row, lease, now);
}

/**
 * Leases on PostgreSQL. Acquiring locks the session's projection row first, like every append,
 * so a takeover and the old owner's appends are serialized and the fence each append reads is
 * the current one. The lease row itself is locked too, so a concurrent renewal (which runs outside
 * the group commit, see `PgLeaseRenewal`) is never lost.
 */
export class PgLeaseOperations {
  constructor(private readonly writer: PgLogWriter) {}

  acquire(sessionId: string, hostId: string, ttlMs: number): PgWriteOperation<LeaseOutcome> {
    checkTtl(ttlMs);
    return {
      sessions: [sessionId],
      run: async (batch) => {
        const state = await batch.load(sessionId);
        if (state === "retired") return { status: "retired" };
        if (!state) return { status: "not_found" };
        const { now, row } = await readLease(batch, sessionId, true);
        const decision = decideAcquire(sessionId, row, hostId, now);
        if (decision.kind === "held") return { status: "held", holder: decision.holder };
        const expiresAt = now + ttlMs;
        await batch.execute(UPSERT, [sessionId, hostId, decision.generation, expiresAt]);
        batch.leaseWritten(sessionId);
        const lease: SessionLease = { sessionId, hostId, generation: decision.generation };
        if (decision.kind === "renew") return { status: "acquired", lease, expiresAt, takeover: null };
        let takeover: { fromHost: string; interruptedTurnId: string | null } | null = null;
        if (decision.takeoverFrom !== null) {
          const interruptedTurnId = await this.closeRunningWork(batch, state, now);
          takeover = { fromHost: decision.takeoverFrom, interruptedTurnId };
        }
        batch.notifyLive({
          kind: "lease",
          owner: state.owner,
          sessionId,
          hostId,
          generation: decision.generation,
        });
        return { status: "acquired", lease, expiresAt, takeover };
      },
    };
  }

  release(lease: SessionLease): PgWriteOperation<void> {
    return {
      sessions: [],
      run: async (batch) => {
        const rows = await batch.read<{ owner: string }>(RELEASE, [
          lease.sessionId,
          lease.hostId,
          lease.generation,
        ]);
        batch.leaseWritten(lease.sessionId);
        const owner = rows[0]?.owner;
        if (owner === undefined) return;
        batch.notifyLive({
          kind: "lease",
          owner,
          sessionId: lease.sessionId,
          hostId: null,
          generation: lease.generation,
        });
      },
    };
  }

  /**
   * Ends the session's running jobs and its open turn unless the turn is parked on a pending
   * interaction; returns the turn closed, if any. One append, one notice (as on SQLite).
   */
  async closeRunningWork(batch: PgWriteBatch, state: SessionState, at: number): Promise<string | null> {
    const events: TimedEvent[] = [];
    const jobs = await batch.read<{ jobId: string }>(RUNNING_JOBS_OF, [state.sessionId]);
    for (const { jobId } of jobs) events.push({ type: "job/ended", data: { jobId, state: "interrupted" } });
    const turnId = state.projection.openTurnId;
    const running =
      turnId !== null &&
      (await batch.read<{ n: number }>(PENDING_IN_TURN, [state.sessionId, turnId]))[0]!.n === 0;
    if (running) events.push({ type: "turn/end", data: { turnId, state: "interrupted" } });
    if (events.length === 0) return null;
    const appended = await this.writer.appendEvents(batch, state, events, at);
    batch.notify(
      state.sessionId,
      { kind: "append", epoch: state.epoch, events: appended },
      batch.snapshot(state),
    );
    return running ? turnId : null;
  }
}
