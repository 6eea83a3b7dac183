import { SessionmuxError } from "../../protocol/index.js";
import { Limits } from "../../protocol/limits.js";
import type { Principal } from "../host/principal.js";

/** Limits kept per principal (one per token entry) across every socket and request. */
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
   * attachments); past it a prompt, create, fork or upload is refused `storage_quota_exceeded`.
   */
  maxStoredBytesPerPrincipal: number;
}

export const DEFAULT_PRINCIPAL_LIMITS: PrincipalLimitOptions = {
  maxSocketsPerPrincipal: 64,
  sessionCreateBurst: 200,
  sessionCreatePerSecond: 10,
  maxSessionsPerPrincipal: Limits.sessionsPerPrincipal,
  maxStoredBytesPerPrincipal: Limits.storedBytesPerPrincipal,
};

interface Bucket {
  tokens: number;
  at: number;
}

/**
 * Keyed by the principal object the authenticator made for a token entry, so two entries never
 * share a count, whatever their names. Admin principals are exempt: the admin token is the
 * operator's own (it can already delete everything), and fan-out tools and benches use it.
 */
export class PrincipalLimits {
  readonly options: PrincipalLimitOptions;
  readonly #sockets = new Map<Principal, number>();
  readonly #buckets = new Map<Principal, Bucket>();
  readonly #now: () => number;

  constructor(options: Partial<PrincipalLimitOptions> = {}, now: () => number = Date.now) {
    this.options = { ...DEFAULT_PRINCIPAL_LIMITS, ...options };
    this.#now = now;
  }

  /** Counts one more socket of `principal`; undefined when it already holds the most it may. */
  acquireSocket(principal: Principal): (() => void) | undefined {
    if (principal.admin) return () => {};
    const held = this.#sockets.get(principal) ?? 0;
    if (held >= this.options.maxSocketsPerPrincipal) return undefined;
    this.#sockets.set(principal, held + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const now = (this.#sockets.get(principal) ?? 1) - 1;
      if (now === 0) this.#sockets.delete(principal);
      else this.#sockets.set(principal, now);
    };
  }

  /** Takes one session creation from the principal's bucket, or throws `rate_limited`. */
  takeSessionCreation(principal: Principal): void {
    if (principal.admin) return;
    const { sessionCreateBurst: size, sessionCreatePerSecond: rate } = this.options;
    const now = this.#now();
    const bucket = this.#buckets.get(principal) ?? { tokens: size, at: now };
    bucket.tokens = Math.min(size, bucket.tokens + ((now - bucket.at) / 1000) * rate);
    bucket.at = now;
    this.#buckets.set(principal, bucket);
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
}
