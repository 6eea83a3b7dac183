import { brandErrorClass } from "./error-brand.js";

/**
 * Error codes of protocol-v1 §3 and §7. The code is the stable contract; messages are for people.
 * A client's retry decision is a pure function of the code (see `isRetryable`).
 */
export const ErrorCategory = {
  protocol: "protocol",
  business: "business",
  internal: "internal",
} as const;
export type ErrorCategory = (typeof ErrorCategory)[keyof typeof ErrorCategory];

interface CodeInfo {
  readonly category: ErrorCategory;
  readonly retryable: boolean;
  /** HTTP status used by the read routes (§8). */
  readonly status: number;
}

export const ErrorCodes = {
  // protocol: the client sent something wrong
  bad_frame: { category: "protocol", retryable: false, status: 400 },
  unknown_method: { category: "protocol", retryable: false, status: 404 },
  bad_request: { category: "protocol", retryable: false, status: 400 },
  duplicate_id: { category: "protocol", retryable: false, status: 400 },
  too_many_streams: { category: "protocol", retryable: false, status: 429 },
  unauthorized: { category: "protocol", retryable: false, status: 401 },
  forbidden_origin: { category: "protocol", retryable: false, status: 403 },
  not_found: { category: "protocol", retryable: false, status: 404 },
  payload_too_large: { category: "protocol", retryable: false, status: 413 },
  // business: understood and refused
  session_not_found: { category: "business", retryable: false, status: 404 },
  session_retired: { category: "business", retryable: false, status: 410 },
  session_exists: { category: "business", retryable: false, status: 409 },
  session_busy: { category: "business", retryable: false, status: 409 },
  epoch_mismatch: { category: "business", retryable: false, status: 409 },
  cursor_ahead: { category: "business", retryable: false, status: 409 },
  interaction_not_found: { category: "business", retryable: false, status: 404 },
  interaction_already_resolved: { category: "business", retryable: false, status: 409 },
  attachment_not_found: { category: "business", retryable: false, status: 404 },
  agent_not_live: { category: "business", retryable: false, status: 409 },
  queue_item_not_found: { category: "business", retryable: false, status: 404 },
  /** A live-state limit (queued prompts per session, queued bytes per principal) was reached. */
  queue_full: { category: "business", retryable: false, status: 429 },
  /** A principal has the most live agents allowed and none of them is idle. */
  too_many_agents: { category: "business", retryable: false, status: 429 },
  /** A principal has the most live sessions allowed (delete one first). */
  too_many_sessions: { category: "business", retryable: false, status: 429 },
  /**
   * A principal stores the most bytes allowed (its sessions' event data and its attachments):
   * nothing more is added (prompts, creates, forks, uploads) until it deletes or clears some.
   */
  storage_quota_exceeded: { category: "business", retryable: false, status: 413 },
  /**
   * A session holds more event data than one read of a whole log returns (an HTTP transcript
   * view, an agent's `turn.history()`, the prefix a fork copies): read it in pages, fork earlier.
   */
  transcript_too_large: { category: "business", retryable: false, status: 409 },
  /** A search's words match more messages than one search ranks: add words to narrow it. */
  search_too_broad: { category: "business", retryable: false, status: 422 },
  // internal: the host failed
  persistence_failure: { category: "internal", retryable: true, status: 503 },
  slow_consumer: { category: "internal", retryable: true, status: 503 },
  host_shutting_down: { category: "internal", retryable: true, status: 503 },
  internal_error: { category: "internal", retryable: false, status: 500 },
  // limits (§7): the host protects itself from one peer; retry after reading answers or waiting
  overloaded: { category: "internal", retryable: true, status: 503 },
  upload_quota_exceeded: { category: "business", retryable: false, status: 413 },
  rate_limited: { category: "business", retryable: true, status: 429 },
  too_many_connections: { category: "protocol", retryable: true, status: 429 },
  forbidden: { category: "protocol", retryable: false, status: 403 },
  /**
   * Several hosts: the host running the session's agent took the call and lost the session before
   * it answered. The call may or may not have taken effect, so nothing retries it blindly: read
   * the session, then send it again if it did not (a prompt with its `clientMessageId` runs once).
   */
  outcome_unknown: { category: "internal", retryable: false, status: 504 },
  // client side: raised by the SDK itself, never sent by a host
  timeout: { category: "internal", retryable: true, status: 504 },
  aborted: { category: "protocol", retryable: false, status: 499 },
  invalid_host_frame: { category: "internal", retryable: false, status: 502 },
  /** The host's `hello` names a protocol version other than this client's (§3). */
  unsupported_protocol: { category: "protocol", retryable: false, status: 502 },
} as const satisfies Record<string, CodeInfo>;

export type ErrorCode = keyof typeof ErrorCodes;
export const ERROR_CODE_LIST = Object.keys(ErrorCodes) as ErrorCode[];

export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === "string" && Object.hasOwn(ErrorCodes, value);
}

export function errorCategory(code: ErrorCode): ErrorCategory {
  return ErrorCodes[code].category;
}

export function isRetryable(code: ErrorCode): boolean {
  return ErrorCodes[code].retryable;
}

export function httpStatus(code: ErrorCode): number {
  return ErrorCodes[code].status;
}

/** The `error` value carried by an `error` frame (§3). */
export interface WireError {
  code: string;
  message: string;
  category: ErrorCategory;
  retryable: boolean;
  data?: unknown;
}

/** The one error class of the project: a typed value with a stable code. */
export class SessionmuxError extends Error {
  readonly code: ErrorCode;
  readonly category: ErrorCategory;
  readonly retryable: boolean;
  readonly data: unknown;

  constructor(code: ErrorCode, message: string, options: { data?: unknown; cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = "SessionmuxError";
    this.code = code;
    this.category = errorCategory(code);
    this.retryable = isRetryable(code);
    this.data = options.data;
  }

  toWire(): WireError {
    const wire: WireError = {
      code: this.code,
      message: this.message,
      category: this.category,
      retryable: this.retryable,
    };
    if (this.data !== undefined) wire.data = this.data;
    return wire;
  }

  /** Rebuilds an error from the wire; an unknown code from a newer host maps to `internal_error`. */
  static fromWire(wire: WireError): SessionmuxError {
    const code = isErrorCode(wire.code) ? wire.code : "internal_error";
    return new SessionmuxError(code, wire.message, { data: wire.data });
  }
}

brandErrorClass(SessionmuxError, "SessionmuxError");

/** Wraps anything thrown into a SessionmuxError without leaking internals to the peer. */
export function toSessionmuxError(err: unknown): SessionmuxError {
  if (err instanceof SessionmuxError) return err;
  return new SessionmuxError("internal_error", "internal error", { cause: err });
}
