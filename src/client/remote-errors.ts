import { brandErrorClass } from "../../protocol/error-brand.js";
import { type ErrorCode, SessionmuxError, type WireError } from "../../protocol/errors.js";

/**
 * A business, protocol or internal error answered by the host for one call or stream (§3).
 * `terminal` is true when retrying the same request cannot help.
 */
export class RemoteError extends SessionmuxError {
  readonly terminal: boolean;

  constructor(code: ErrorCode, message: string, options: { data?: unknown; cause?: unknown } = {}) {
    super(code, message, options);
    this.name = "RemoteError";
    this.terminal = !this.retryable;
  }

  /** Rebuilds the host's `error` value; an unknown code from a newer host maps to `internal_error`. */
  static fromWireError(wire: WireError): RemoteError {
    const base = SessionmuxError.fromWire(wire);
    return new RemoteError(base.code, wire.message, { data: wire.data });
  }
}

/**
 * The host answered the WebSocket upgrade with an HTTP error (§2). The connection state is then
 * `unauthorized` or `rejected`, and retrying with the same token and URL cannot help; or, for 429
 * `too_many_connections` (retryable), a `backoff` naming it: the client retries as sockets free up.
 */
export class ConnectionRefusedError extends RemoteError {
  readonly status: number;

  constructor(status: number, url: string) {
    super(refusalCode(status), refusalMessage(status, url), { data: { status } });
    this.name = "ConnectionRefusedError";
    this.status = status;
  }
}

brandErrorClass(RemoteError, "RemoteError");
brandErrorClass(ConnectionRefusedError, "ConnectionRefusedError");

function refusalCode(status: number): ErrorCode {
  if (status === 401) return "unauthorized";
  if (status === 403) return "forbidden_origin";
  if (status === 404) return "not_found";
  return status === 429 ? "too_many_connections" : "bad_request";
}

function refusalMessage(status: number, url: string): string {
  if (status === 401) return `the host refused the token (HTTP 401) at ${url}; supply a valid one (setToken)`;
  if (status === 403) return `the host refused this origin or token (HTTP 403) at ${url}; check both`;
  if (status === 429) return `the host allows this principal no more sockets (HTTP 429) at ${url}; retrying`;
  if (status === 404)
    return `nothing serves the mux at ${url} (HTTP 404); check the URL: the mux is /api/remote.mux below the host's base path (/chat/api/remote.mux for a host mounted at /chat)`;
  return `the host refused the connection (HTTP ${status}) at ${url}; check the URL and client version`;
}

/** Why a carrier error happened: the socket died, or the caller closed the client. */
export type CarrierReason = "socket_lost" | "client_closed";

/**
 * The socket carrying a call or stream died before it finished (§3: "a lost socket is not a
 * frame"). Not a host answer: the request may or may not have taken effect.
 */
export class RemoteStreamCarrierError extends Error {
  readonly reason: CarrierReason;
  /** A carrier loss can be retried unless the client itself was closed. */
  readonly retryable: boolean;

  constructor(reason: CarrierReason, message?: string) {
    super(
      message ?? (reason === "client_closed" ? "client closed" : "connection to the host was lost; retry"),
    );
    this.name = "RemoteStreamCarrierError";
    this.reason = reason;
    this.retryable = reason === "socket_lost";
  }
}

brandErrorClass(RemoteStreamCarrierError, "RemoteStreamCarrierError");

/**
 * The retry decision, a pure function of the error: carrier losses retry (unless the client was
 * closed), host answers retry only when their code is marked retryable in `protocol/errors.ts`.
 */
export function shouldRetry(error: unknown): boolean {
  if (error instanceof RemoteStreamCarrierError) return error.retryable;
  if (error instanceof SessionmuxError) return error.retryable;
  return false;
}
