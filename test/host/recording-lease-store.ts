import type {
  LeaseOutcome,
  RenewOutcome,
  SessionLease,
  SessionLeaseStore,
} from "../../src/store/session-lease.js";

/**
 * Records what a host asks of the lease store, and answers as the test sets it up: renewals that
 * lose some sessions or fail, takes answered `held` or as takeovers, releases that fail, and any
 * operation held until the test lets it go. What the host does with the answers is under test.
 */
export class RecordingLeaseStore implements SessionLeaseStore {
  readonly renewals: { at: number; sessions: string[] }[] = [];
  readonly released: string[] = [];
  readonly acquired: string[] = [];
  lose = new Set<string>();
  /** The next renewal throws this. */
  renewFails: Error | undefined;
  /** While set, every renewal throws this (a database away). */
  renewalsDown: Error | undefined;
  /** Every release throws this. */
  releaseFails: Error | undefined;
  /** The next take is answered so. */
  nextAcquire: "held" | { takeoverFrom: string; interruptedTurnId: string } | undefined;
  /** While set, takes and renewals wait for it. */
  hold: Promise<void> | undefined;
  #generation = 0;

  async acquireLease(sessionId: string, hostId: string): Promise<LeaseOutcome> {
    await this.hold;
    this.acquired.push(sessionId);
    const next = this.nextAcquire;
    this.nextAcquire = undefined;
    if (next === "held")
      return {
        status: "held",
        holder: { sessionId, hostId: "other", generation: ++this.#generation, expiresAt: 0 },
      };
    return {
      status: "acquired",
      lease: { sessionId, hostId, generation: ++this.#generation },
      expiresAt: 0,
      takeover: next ? { fromHost: next.takeoverFrom, interruptedTurnId: next.interruptedTurnId } : null,
    };
  }
  async renewLeases(_hostId: string, leases: readonly SessionLease[]): Promise<RenewOutcome> {
    await this.hold;
    this.renewals.push({ at: Date.now(), sessions: leases.map((l) => l.sessionId) });
    const fails = this.renewFails ?? this.renewalsDown;
    this.renewFails = undefined;
    if (fails) throw fails;
    return {
      renewed: leases.filter((l) => !this.lose.has(l.sessionId)),
      lost: leases.filter((l) => this.lose.has(l.sessionId)),
    };
  }
  async releaseLease(lease: SessionLease): Promise<void> {
    this.released.push(lease.sessionId);
    if (this.releaseFails) throw this.releaseFails;
  }
  async leaseHolder(): Promise<null> {
    return null;
  }
  async leasePage() {
    return { leases: [], next: null };
  }
  async unownedQueues(): Promise<string[]> {
    return [];
  }
}
