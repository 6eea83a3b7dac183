import { backoffCeiling } from "../../src/client/index.js";

/** The first wait before the console opens again a stream the host ended with an error. */
export const RETRY_FIRST_MS = 2_000;
/** The longest such wait while the stream keeps failing. */
export const RETRY_CAP_MS = 60_000;

const POLICY = { baseMs: RETRY_FIRST_MS, capMs: RETRY_CAP_MS };

/**
 * The waits between attempts to open a stream again: 2 s, doubling up to a minute while attempts
 * keep failing, and from 2 s again once one succeeded (`reset`). The client's own backoff curve,
 * without its jitter: one console tab does not need spreading out.
 */
export class RetryWait {
  #failures = 0;

  /** The wait before the next attempt; the one after it is twice as long, up to the cap. */
  next(): number {
    return backoffCeiling(this.#failures++, POLICY);
  }

  /** An attempt succeeded: the next failure waits the first wait again. */
  reset(): void {
    this.#failures = 0;
  }
}
