import type { Logger } from "pino";
import type { LeaseOutcome, SessionLease, SessionLeaseStore } from "../store/session-lease.js";
import { FailureRunLog } from "./failure-run-log.js";
import type { LeaseLoss, LeaseMeters } from "./host-meters.js";

/** A lease lives this long unless renewed. */
export const DEFAULT_LEASE_TTL_MS = 10_000;

/** What an append on an agent's behalf passes: the lease (several hosts) or nothing (one host). */
export type FenceOptions = { fence?: SessionLease };

/**
 * Whose appends may go to the log. A single host owns every session (`SoleOwnership`); hosts
 * sharing a store hold one lease per session (`HostLeases`). `fence` returns null when this host
 * no longer owns the session: nothing may then be appended on its agent's behalf.
 */
export interface Ownership {
  fence(sessionId: string): FenceOptions | null;
  /** An append under `lease` was refused `fenced`: the lease is gone. */
  fenced(lease: SessionLease): void;
}

/** The embedded store serves one host: it owns every session, appends carry no fence. */
export class SoleOwnership implements Ownership {
  fence(): FenceOptions {
    return {};
  }
  fenced(): void {}
}

export interface HostLeasesOptions {
  store: SessionLeaseStore;
  hostId: string;
  ttlMs?: number;
  logger: Logger;
  /** A lease this host held is gone (a renewal or an append said so): stop that session's agent. */
  onLost: (lease: SessionLease) => void;
  /** Runs after each renewal round while the clock runs (see `HostCluster`'s sweep). */
  sweep?: () => Promise<void>;
  meters?: LeaseMeters;
}

/**
 * This host's session leases: taken before an agent attaches, renewed together every third of
 * their lifetime, released when the agent detaches or the host stops. Operations on one session's
 * lease run one after another, so a release and a new take cannot overtake each other.
 */
export class HostLeases implements Ownership {
  readonly hostId: string;
  readonly ttlMs: number;
  readonly #store: SessionLeaseStore;
  readonly #logger: Logger;
  readonly #onLost: (lease: SessionLease) => void;
  readonly #sweep: (() => Promise<void>) | undefined;
  readonly #meters: LeaseMeters | undefined;
  readonly #held = new Map<string, SessionLease>();
  readonly #queues = new Map<string, Promise<unknown>>();
  readonly #renewals: FailureRunLog;
  readonly #sweeps: FailureRunLog;
  #timer: NodeJS.Timeout | undefined;
  #renewing: Promise<void> | undefined;
  #stopped = false;

  constructor(options: HostLeasesOptions) {
    this.#store = options.store;
    this.hostId = options.hostId;
    this.ttlMs = options.ttlMs ?? DEFAULT_LEASE_TTL_MS;
    this.#logger = options.logger;
    this.#onLost = options.onLost;
    this.#sweep = options.sweep;
    this.#meters = options.meters;
    this.#renewals = new FailureRunLog(options.logger, {
      failed: "renewing session leases failed",
      recovered: "renewing session leases works again",
    });
    this.#sweeps = new FailureRunLog(options.logger, {
      failed: "sweeping sessions nobody owns failed",
      recovered: "sweeping sessions nobody owns works again",
    });
  }

  /** Starts the lease clock: every `ttlMs / 3` a renewal round, then the sweep. */
  start(): void {
    this.#stopped = false;
    this.#schedule();
  }

  /** Stops the clock (renewals and sweeps) without releasing: the leases run out by themselves (a paused host). */
  stopRenewals(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  lease(sessionId: string): SessionLease | undefined {
    return this.#held.get(sessionId);
  }

  held(): SessionLease[] {
    return [...this.#held.values()];
  }

  fence(sessionId: string): FenceOptions | null {
    const lease = this.#held.get(sessionId);
    return lease ? { fence: lease } : null;
  }

  fenced(lease: SessionLease): void {
    this.#lost(lease, "fenced");
  }

  /** Takes (or keeps) the session's lease; `held` names the live host that has it instead. */
  acquire(sessionId: string): Promise<LeaseOutcome> {
    return this.#serial(sessionId, async () => {
      const outcome = await this.#store.acquireLease(sessionId, this.hostId, this.ttlMs);
      if (outcome.status === "acquired") {
        this.#held.set(sessionId, outcome.lease);
        this.#meters?.leasesHeld(this.#held.size);
        if (outcome.takeover) {
          this.#meters?.leaseTakenOver();
          this.#logger.info(
            {
              sessionId,
              fromHost: outcome.takeover.fromHost,
              interruptedTurnId: outcome.takeover.interruptedTurnId,
            },
            "took over an expired session lease",
          );
        }
      }
      return outcome;
    });
  }

  /** Gives the lease up so another host may take the session at once; not while `keep` says so. */
  release(sessionId: string, keep: () => boolean = () => false): Promise<void> {
    return this.#serial(sessionId, async () => {
      const lease = this.#held.get(sessionId);
      if (!lease || keep()) return;
      this.#held.delete(sessionId);
      this.#meters?.leasesHeld(this.#held.size);
      await this.#store.releaseLease(lease).catch((err: unknown) => {
        // it then simply expires
        this.#logger.warn({ err, sessionId }, "releasing a session lease failed");
      });
    });
  }

  async releaseAll(): Promise<void> {
    this.stopRenewals();
    await this.#renewing;
    await Promise.all([...this.#held.keys()].map((sessionId) => this.release(sessionId)));
  }

  /** One renewal round now (the clock calls it; tests may too). */
  renew(): Promise<void> {
    this.#renewing ??= this.#renewRound().finally(() => {
      this.#renewing = undefined;
    });
    return this.#renewing;
  }

  async #renewRound(): Promise<void> {
    const leases = this.held();
    if (leases.length === 0) return;
    try {
      const outcome = await this.#store.renewLeases(this.hostId, leases, this.ttlMs);
      this.#renewals.succeeded();
      for (const lease of outcome.lost) this.#lost(lease, "renewal_refused");
    } catch (err) {
      this.#meters?.leaseRenewalFailed();
      // the store's clock decides: if the leases expire meanwhile, appends are fenced
      this.#renewals.failed(err, { leases: leases.length });
    }
  }

  #schedule(): void {
    if (this.#stopped) return;
    this.#timer = setTimeout(
      () => {
        void this.renew()
          .then(() => this.#sweepRound())
          .finally(() => this.#schedule());
      },
      Math.max(1, Math.floor(this.ttlMs / 3)),
    );
    this.#timer.unref();
  }

  async #sweepRound(): Promise<void> {
    if (this.#stopped || !this.#sweep) return;
    await this.#sweep().then(
      () => this.#sweeps.succeeded(),
      // the next round tries again
      (err: unknown) => this.#sweeps.failed(err),
    );
  }

  #lost(lease: SessionLease, why: LeaseLoss): void {
    const current = this.#held.get(lease.sessionId);
    if (!current || current.generation !== lease.generation) return;
    this.#held.delete(lease.sessionId);
    this.#meters?.leasesHeld(this.#held.size);
    this.#meters?.leaseLost(why);
    this.#logger.warn(
      // the host's logger names the host already
      { sessionId: lease.sessionId, generation: lease.generation, why },
      "session lease lost: its agent stops here",
    );
    this.#onLost(lease);
  }

  #serial<T>(sessionId: string, run: () => Promise<T>): Promise<T> {
    const previous = this.#queues.get(sessionId) ?? Promise.resolve();
    const next = previous.then(run, run);
    const settled = next.catch(() => undefined);
    this.#queues.set(sessionId, settled);
    void settled.then(() => {
      if (this.#queues.get(sessionId) === settled) this.#queues.delete(sessionId);
    });
    return next;
  }
}
