import { SessionmuxError } from "../../protocol/index.js";

/**
 * How long a write the store refused (a full disk, storage turned read-only) waits before the
 * host tries it again: a queued prompt's start, a turn's `turn/end`. Trying again at once spun
 * the host, each attempt logging a warning, as long as the disk stayed full.
 */
export interface StoreRetry {
  /** The wait after the first refusal; each further one doubles it. */
  firstMs: number;
  /** The longest wait. */
  maxMs: number;
}

export const DEFAULT_STORE_RETRY: StoreRetry = { firstMs: 1_000, maxMs: 15_000 };

/** The wait before attempt `failures + 1`, after `failures` (≥ 1) refusals in a row. */
export function storeRetryDelay(retry: StoreRetry, failures: number): number {
  return Math.min(retry.maxMs, retry.firstMs * 2 ** Math.min(failures - 1, 30));
}

/** The store could not write at all (not a refusal of this one write): worth trying again later. */
export function isStoreFailure(err: unknown): boolean {
  return err instanceof SessionmuxError && err.code === "persistence_failure";
}
