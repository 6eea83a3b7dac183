import { SessionmuxError } from "../../protocol/index.js";
import { Limits } from "../../protocol/limits.js";
import type { Principal } from "../host/principal.js";
import { CountsByKey } from "../store/counts-by-key.js";

/** Limits kept per principal (by name) across every socket and request. */
export interface PrincipalLimitOptions {
  /** @default 64 — mux sockets one (non-admin) principal may hold open; one more is refused with 429. */
  maxSocketsPerPrincipal: number;
  /** @default 200 — sessions a principal may create at once (the bucket's size). */
  sessionCreateBurst: number;
  /** @default 10 — sessions per second the bucket refills. */
  sessionCreatePerSecond: number;
  /**
   * @default 10,000 — live sessions one (non-admin) principal may hold; one more `create` or
   * `fork` is refused `too_many_sessions`. Counted by the store, inside the creating transaction.
   */
  maxSessionsPerPrincipal: number;
  /**
   * @default 1 GiB — bytes one (non-admin) principal may store (its sessions' event data and its
   * attachments); past it a prompt, create, fork, rename, model choice or upload is refused `storage_quota_exceeded`.
   */
  maxStoredBytesPerPrincipal: number;
  /**
   * @default 8 — `session.search` calls one (non-admin) principal may have running at once, across
   * its sockets; one more is refused `overloaded`. A search holds the store's search capacity (the
   * SQLite read thread's 64 reads, half the PostgreSQL pool) while it runs or waits for its turn.
   */
  maxSearchesPerPrincipal: number;
  /**
   * @default 256 — `session.control` streams one (non-admin) principal may hold open, across its
   * sockets; one more is refused `too_many_streams`. Every change of the principal's sessions goes
   * to each of them, and each one a slow reader leaves behind queues up to 5,000 of them.
   */
  maxControlStreamsPerPrincipal: number;
}

export const DEFAULT_PRINCIPAL_LIMITS: PrincipalLimitOptions = {
  maxSocketsPerPrincipal: 64,
  sessionCreateBurst: 200,
  sessionCreatePerSecond: 10,
  maxSessionsPerPrincipal: Limits.sessionsPerPrincipal,
  maxStoredBytesPerPrincipal: Limits.storedBytesPerPrincipal,
  maxSearchesPerPrincipal: 8,
  maxControlStreamsPerPrincipal: 256,
};

interface Bucket {
  tokens: number;
  at: number;
}

/** Above this many buckets, the full ones (no different from none) are dropped before a new one is kept. */
const BUCKETS_KEPT = 1_024;

/**
 * Keyed by the principal's name: it is what the store records as the owner and counts sessions and
 * bytes by. Token entries have unique names; an app's own `authenticate` makes a new principal
 * object for every request and socket, so a count kept per object would never reach its limit
 * (and would keep one bucket per request). Admin principals are exempt: the admin token is the
 * operator's own (it can already delete everything), and fan-out tools and benches use it. Past
 * `BUCKETS_KEPT` buckets, the ones refilled to their size are dropped, so the map holds at most
 * that many or twice the principals that created a session within the last two refills
 * (`sessionCreateBurst / sessionCreatePerSecond` seconds each); a socket's count goes with it.
 */
export class PrincipalLimits {
  readonly options: PrincipalLimitOptions;
  /** Sockets held, searches running and control streams open per principal: a name holding none is not kept. */
  readonly #sockets = new CountsByKey();
  readonly #searches = new CountsByKey();
  readonly #controlStreams = new CountsByKey();
  readonly #buckets = new Map<string, Bucket>();
  readonly #now: () => number;
  #pruneAt = BUCKETS_KEPT;
  #prunedAt = 0;

  constructor(options: Partial<PrincipalLimitOptions> = {}, now: () => number = () => performance.now()) {
    this.options = { ...DEFAULT_PRINCIPAL_LIMITS, ...options };
    this.#now = now;
  }

  /** Counts one more socket of `principal`; undefined when it already holds the most it may. */
  acquireSocket(principal: Principal): (() => void) | undefined {
    if (principal.admin) return () => {};
    return hold(this.#sockets, principal.name, this.options.maxSocketsPerPrincipal);
  }

  /**
   * Counts one more search of `principal` until the returned release runs, or throws `overloaded`
   * (`data: {limit: "searches_per_principal", max}`) when it already runs the most it may.
   */
  takeSearch(principal: Principal): () => void {
    if (principal.admin) return () => {};
    const max = this.options.maxSearchesPerPrincipal;
    const release = hold(this.#searches, principal.name, max);
    if (release === undefined)
      throw new SessionmuxError(
        "overloaded",
        `at most ${max} searches of one principal run at once; wait for an answer, then retry`,
        { data: { limit: "searches_per_principal", max } },
      );
    return release;
  }

  /**
   * Counts one more `session.control` stream of `principal` until the returned release runs, or
   * throws `too_many_streams` (`data: {limit: "control_streams_per_principal", max}`) when it
   * already holds the most it may.
   */
  takeControlStream(principal: Principal): () => void {
    if (principal.admin) return () => {};
    const max = this.options.maxControlStreamsPerPrincipal;
    const release = hold(this.#controlStreams, principal.name, max);
    if (release === undefined)
      throw new SessionmuxError(
        "too_many_streams",
        `at most ${max} session.control streams of one principal are open at once; close one first`,
        { data: { limit: "control_streams_per_principal", max } },
      );
    return release;
  }

  /** Takes one session creation from the principal's bucket, or throws `rate_limited`. */
  takeSessionCreation(principal: Principal): void {
    if (principal.admin) return;
    const { sessionCreateBurst: size, sessionCreatePerSecond: rate } = this.options;
    const now = this.#now();
    let bucket = this.#buckets.get(principal.name);
    if (bucket === undefined) {
      const refillMs = (size / rate) * 1000;
      const due = this.#buckets.size >= this.#pruneAt || now - this.#prunedAt >= refillMs;
      if (due && this.#buckets.size >= BUCKETS_KEPT) this.#dropFullBuckets(now);
      bucket = { tokens: size, at: now };
      this.#buckets.set(principal.name, bucket);
    }
    bucket.tokens = Math.min(size, this.#refilled(bucket, now));
    bucket.at = now;
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return;
    }
    const retryAfterMs = Math.ceil(((1 - bucket.tokens) / rate) * 1000);
    throw new SessionmuxError(
      "rate_limited",
      `at most ${rate} new sessions per second (bursts of ${size}); retry in ${retryAfterMs} ms`,
      { data: { retryAfterMs } },
    );
  }

  /**
   * Drops the buckets refilled to their size (no different from none). The next prune waits until
   * the map has doubled or one refill has passed, so pruning costs O(1) per new bucket.
   */
  #dropFullBuckets(now: number): void {
    const size = this.options.sessionCreateBurst;
    for (const [name, bucket] of this.#buckets)
      if (this.#refilled(bucket, now) >= size) this.#buckets.delete(name);
    this.#pruneAt = Math.max(BUCKETS_KEPT, 2 * this.#buckets.size);
    this.#prunedAt = now;
  }

  /**
   * The bucket's creations by `now`, not capped at its size. Never less than nothing elapsed: a
   * clock stepped back (NTP, a VM restored) must not drain every bucket by the time it went back.
   */
  #refilled(bucket: Bucket, now: number): number {
    return bucket.tokens + (Math.max(0, now - bucket.at) / 1000) * this.options.sessionCreatePerSecond;
  }

  /** Principals with a bucket kept (for tests of its bound). */
  get bucketCount(): number {
    return this.#buckets.size;
  }

  /** Principals holding a socket (for tests of its bound: one that holds none is not kept). */
  get socketHolderCount(): number {
    return this.#sockets.size;
  }
}

/** Counts one more for `name` and returns what takes it back (once, however often it runs); undefined at `max`. */
function hold(counts: CountsByKey, name: string, max: number): (() => void) | undefined {
  if (counts.get(name) >= max) return undefined;
  counts.add(name);
  let released = false;
  return () => {
    if (released) return;
    released = true;
    counts.add(name, -1);
  };
}
