import { DEFAULT_FORWARD_TIMEOUT_MS } from "../host/call-router.js";

/**
 * The least value of each limit below which a host would not just be strict but stop working as
 * documented. `serve`'s flags and `createSessionmux`'s options refuse less with the same floor, so
 * a host set up either way takes the same values.
 */
export const LIMIT_FLOORS = {
  /** Under a frame header and a small item, a socket would stop being read after every frame it is owed. */
  sendHighWaterBytes: 1024,
  /**
   * One event's data may be 1 MiB and the log is read 1 MiB at a time: under it, a session holding
   * one such event could never be viewed nor handed to its agent as history.
   */
  maxTranscriptBytes: 1024 * 1024,
  /**
   * Uploads are swept at most once a second: a shorter lifetime would delete one before the prompt
   * that names it could arrive.
   */
  uploadTtlMs: 1000,
  /**
   * How often PostgreSQL connections are checked (`--db-listen-check-ms`, `--db-query-check-ms`):
   * under it, a round trip to a distant server or a short stall of the host's own event loop would
   * count a healthy connection as lost, and the checks would run in a near busy loop.
   */
  dbCheckMs: 100,
  /**
   * How long a sender waits on a forwarded call its owner claimed (`--claimed-call-wait-ms`): under
   * the forward wait it would give up a call still running there sooner than one never claimed,
   * answering `outcome_unknown` where the wait alone would have brought the reply.
   */
  claimedWaitMs: DEFAULT_FORWARD_TIMEOUT_MS,
} as const;
