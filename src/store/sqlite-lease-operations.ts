import type { WriteOperation } from "./group-commit.js";
import { checkTtl, decideAcquire, type LeaseRow, leaseIsCurrent } from "./lease-rules.js";
import type { LogWriter, TimedEvent } from "./log-writer.js";
import type { HeldLease, LeaseHolder, LeaseOutcome, RenewOutcome, SessionLease } from "./session-lease.js";
import type { SessionState } from "./session-state.js";
import type { Statements } from "./sqlite-statements.js";
import type { WriteBatch } from "./write-batch.js";

/**
 * Leases on SQLite, as group-commit operations: the rows and rules are those of the PostgreSQL
 * store, so one contract suite proves both. One process writes the file, so "hosts" here are the
 * callers sharing this store (the rules still hold between them).
 */
export class SqliteLeaseOperations {
  constructor(
    private readonly writer: LogWriter,
    private readonly statements: Statements,
    private readonly now: () => number,
  ) {}

  row(sessionId: string): LeaseRow | undefined {
    return this.statements.leaseRow.get(sessionId) as LeaseRow | undefined;
  }

  acquire(sessionId: string, hostId: string, ttlMs: number): WriteOperation<LeaseOutcome> {
    checkTtl(ttlMs);
    return (batch) => {
      const state = this.writer.load(sessionId);
      if (state === "retired") return { status: "retired" };
      if (!state) return { status: "not_found" };
      const now = this.now();
      const decision = decideAcquire(sessionId, this.row(sessionId), hostId, now);
      if (decision.kind === "held") return { status: "held", holder: decision.holder };
      const expiresAt = now + ttlMs;
      this.statements.upsertLease.run(sessionId, hostId, decision.generation, expiresAt);
      const lease: SessionLease = { sessionId, hostId, generation: decision.generation };
      if (decision.kind === "renew") return { status: "acquired", lease, expiresAt, takeover: null };
      let takeover: { fromHost: string; interruptedTurnId: string | null } | null = null;
      if (decision.takeoverFrom !== null) {
        const interruptedTurnId = this.closeRunningWork(batch, state, now);
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
    };
  }

  renew(hostId: string, leases: readonly SessionLease[], ttlMs: number): WriteOperation<RenewOutcome> {
    checkTtl(ttlMs);
    return () => {
      const now = this.now();
      const outcome: RenewOutcome = { renewed: [], lost: [] };
      for (const lease of leases) {
        const current = lease.hostId === hostId && leaseIsCurrent(this.row(lease.sessionId), lease, now);
        if (current)
          this.statements.renewLease.run(now + ttlMs, lease.sessionId, hostId, lease.generation, now);
        (current ? outcome.renewed : outcome.lost).push(lease);
      }
      return outcome;
    };
  }

  release(lease: SessionLease): WriteOperation<void> {
    return (batch) => {
      const released = this.statements.releaseLease.run(lease.sessionId, lease.hostId, lease.generation);
      if (released.changes === 0) return;
      const state = this.writer.load(lease.sessionId);
      if (!state || state === "retired") return;
      batch.notifyLive({
        kind: "lease",
        owner: state.owner,
        sessionId: lease.sessionId,
        hostId: null,
        generation: lease.generation,
      });
    };
  }

  holder(sessionId: string): LeaseHolder | null {
    const row = this.row(sessionId);
    if (!row || row.hostId === null || row.expiresAt <= this.now()) return null;
    return { sessionId, hostId: row.hostId, generation: row.generation, expiresAt: row.expiresAt };
  }

  page(after: string | null, limit: number): { leases: HeldLease[]; next: string | null } {
    const leases = this.statements.leasesPage.all(this.now(), after ?? "", limit) as HeldLease[];
    return { leases, next: leases.length < limit ? null : (leases.at(-1)?.sessionId ?? null) };
  }

  unownedQueues(limit: number): string[] {
    return this.statements.unownedQueues.all(this.now(), limit) as string[];
  }

  /**
   * Ends the session's running jobs and its open turn unless the turn is parked on a pending
   * interaction (its answer resumes it); returns the turn closed, if any. One append, one notice.
   */
  closeRunningWork(batch: WriteBatch, state: SessionState, at: number): string | null {
    const events: TimedEvent[] = [];
    const jobs = this.statements.runningJobsOfSession.all(state.sessionId) as { jobId: string }[];
    for (const { jobId } of jobs) events.push({ type: "job/ended", data: { jobId, state: "interrupted" } });
    const turnId = state.projection.openTurnId;
    const running =
      turnId !== null && (this.statements.pendingInTurn.get(state.sessionId, turnId) as number) === 0;
    if (running) events.push({ type: "turn/end", data: { turnId, state: "interrupted" } });
    if (events.length === 0) return null;
    const appended = this.writer.appendEvents(batch, state, events, at);
    batch.notify(
      state.sessionId,
      { kind: "append", epoch: state.epoch, events: appended },
      this.writer.snapshot(state),
    );
    return running ? turnId : null;
  }
}
