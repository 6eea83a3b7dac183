/** The first wait before the console opens again a stream the host ended with an error. */
export const RETRY_FIRST_MS = 2_000;
/** The longest such wait while the stream keeps failing. */
export const RETRY_CAP_MS = 60_000;

/**
 * The waits between attempts to open a stream again: 2 s, doubling up to a minute while attempts
 * keep failing, and from 2 s again once one succeeded (`reset`).
 */
export class RetryWait {
  #nextMs = RETRY_FIRST_MS;

  /** The wait before the next attempt; the one after it is twice as long, up to the cap. */
  next(): number {
    const wait = this.#nextMs;
    this.#nextMs = Math.min(wait * 2, RETRY_CAP_MS);
    return wait;
  }

  /** An attempt succeeded: the next failure waits the first wait again. */
  reset(): void {
    this.#nextMs = RETRY_FIRST_MS;
  }
}
