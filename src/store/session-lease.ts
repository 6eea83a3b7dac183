/**
 * Leases: at most one host runs a session's agent at a time. A lease carries a fencing token
 * (`generation`, strictly increasing per session) that every append made on the agent's behalf
 * passes as `AppendOptions.fence`; the store checks it inside the append's own transaction, so a
 * host that lost its lease (paused, partitioned, expired) can never append again: such an append
 * is refused as `{status:"fenced"}` and writes nothing. Expiry is judged by the store's clock
 * (PostgreSQL's `now()`, the SQLite store's `now`), never by a host's. An expired lease is lost
 * even before another host takes it: its fence is refused and it cannot be renewed.
 *
 * Writes any host may make (enqueue, queue edits, answers, create, clear, delete) are not fenced:
 * they are decided by rows and constraints, and the owner learns of them through `subscribeLive`,
 * which on a shared store carries every host's notices (including `{kind:"lease"}` changes).
 */
export interface SessionLeaseStore {
  /**
   * Takes the lease of `sessionId` for `hostId` when it is free, expired or already this host's
   * (then it is renewed and keeps its generation). Any other take bumps the generation. Taking
   * over an expired lease (from any host, this one included) closes that session's running turn
   * (not a parked one) and its running jobs as `interrupted` in the same transaction.
   */
  acquireLease(sessionId: string, hostId: string, ttlMs: number): Promise<LeaseOutcome>;
  /** Extends this host's leases still current; the ones already lost (taken, expired, released) are in `lost`. */
  renewLeases(hostId: string, leases: readonly SessionLease[], ttlMs: number): Promise<RenewOutcome>;
  /** Gives the lease up (detach, shutdown) so another host may take it at once; a lost one is left alone. */
  releaseLease(lease: SessionLease): Promise<void>;
  /** The current holder, or null when nobody holds an unexpired lease. */
  leaseHolder(sessionId: string): Promise<LeaseHolder | null>;
  /**
   * Unexpired leases in session id order after `after` (null: from the start), at most `limit`;
   * `next` continues, null at the end. For a control baseline of agents other hosts run.
   */
  leasePage(after: string | null, limit: number): Promise<{ leases: HeldLease[]; next: string | null }>;
  /**
   * Up to `limit` sessions, in id order, with queued prompts whose agent nobody runs: no lease, a
   * released one or an expired one (its owner died or paused). A session whose open turn waits on
   * a person is left out: its queue waits behind that turn. Hosts sweep these to take them over.
   */
  unownedQueues(limit: number): Promise<string[]>;
}

export interface SessionLease {
  sessionId: string;
  hostId: string;
  /** The fencing token: strictly increasing per session across all hosts. */
  generation: number;
}

export interface LeaseHolder extends SessionLease {
  /** Epoch milliseconds by the store's clock. */
  expiresAt: number;
}

/** A held lease as a page lists it, with its session's owner (for the view of other hosts' agents). */
export interface HeldLease extends LeaseHolder {
  owner: string;
}

export type LeaseOutcome =
  | {
      status: "acquired";
      lease: SessionLease;
      /** Epoch milliseconds by the store's clock. */
      expiresAt: number;
      /**
       * An expired lease was taken over (also one this host had let expire); `interruptedTurnId`
       * names the running turn closed as interrupted, null when none was running.
       */
      takeover: { fromHost: string; interruptedTurnId: string | null } | null;
    }
  | { status: "held"; holder: LeaseHolder }
  | { status: "not_found" }
  | { status: "retired" };

export interface RenewOutcome {
  renewed: SessionLease[];
  lost: SessionLease[];
}
