import { SessionmuxError } from "../../../protocol/index.js";

/**
 * How long one statement of a search (its count of matches, then its ranked or newest hits) may
 * run on PostgreSQL, lock waits included; the server cancels it past this (see `boundedReadOn`).
 * Every search within the store's bounds answers in well under a second (the slowest ones measured
 * 0.1–2 s on a loaded 2-core machine); a client's call gives up after 30 s by default, and without
 * this the backend ran on long after it had.
 */
export const SEARCH_STATEMENT_TIMEOUT_MS = 10_000;

/** A search statement ran past its time on the database, which cancelled it: nothing is answered. */
export function searchTimedOut(ms: number): SessionmuxError {
  return new SessionmuxError(
    "overloaded",
    `this search ran on the database for more than ${ms} ms and was stopped; retry shortly, or add words to narrow it`,
    { data: { limit: "search_statement_ms", max: ms } },
  );
}
