import { SessionmuxError } from "../../protocol/errors.js";
import { ConnectionRefusedError, RemoteStreamCarrierError } from "./remote-errors.js";

/**
 * What a supervised stream does after it failed:
 * - `reconnect`: the socket carrying it died; reopen on the next socket (the connection's
 *   reconnect loop paces it).
 * - `retry`: the host refused or ended it with a retryable code; one isolated retry per host
 *   generation, then wait for the next generation.
 * - `await-open`: the host refused the connection (a bad token or path; or 429, too many sockets,
 *   which the client retries); reopen once a socket opens again (after a new token, or once one
 *   of the principal's sockets closed).
 * - `complete`: the client was closed.
 * - `fail`: terminal; published as the stream's error.
 */
export type StreamRecovery = "reconnect" | "retry" | "await-open" | "complete" | "fail";

/**
 * The supervisor's decision, a pure function of the error. `persistence_failure` is terminal for
 * streams although retryable for a unary call: a store that cannot write does not heal by
 * reopening a reader, and reopening in a loop only adds load to a failing host. A follow stream
 * whose reads (its open's too) fail so is retried by the host itself, open and quiet, for its
 * `followReadRetryMs`: the error reaches the client only once that is over.
 */
export function streamRecovery(error: unknown): StreamRecovery {
  if (error instanceof RemoteStreamCarrierError) return error.retryable ? "reconnect" : "complete";
  if (error instanceof ConnectionRefusedError) return "await-open";
  if (error instanceof SessionmuxError && error.retryable && error.code !== "persistence_failure") {
    return "retry";
  }
  return "fail";
}
