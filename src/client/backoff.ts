/** Capped full-jitter exponential backoff (style.md take 8). */
export interface BackoffPolicy {
  /** @default 250 */
  baseMs: number;
  /** @default 10_000 */
  capMs: number;
}

/** The client's default backoff: 250 ms base, 10 s cap. */
export const DEFAULT_BACKOFF: Readonly<BackoffPolicy> = Object.freeze({ baseMs: 250, capMs: 10_000 });

/** The upper bound of the delay before retry number `attempt` (0-based): `min(cap, base * 2^attempt)`. */
export function backoffCeiling(attempt: number, policy: BackoffPolicy = DEFAULT_BACKOFF): number {
  // 2^attempt overflows to Infinity for large attempts; min() with the cap keeps it finite.
  return Math.min(policy.capMs, policy.baseMs * 2 ** Math.max(0, attempt));
}

/** The delay before retry number `attempt`: `random() * min(cap, base * 2^attempt)`, `random` in [0, 1). */
export function backoffDelay(
  attempt: number,
  policy: BackoffPolicy = DEFAULT_BACKOFF,
  random: () => number = Math.random,
): number {
  return random() * backoffCeiling(attempt, policy);
}
