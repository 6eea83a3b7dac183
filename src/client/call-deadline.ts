import { SessionmuxError } from "../../protocol/errors.js";
import { longTimeout } from "./long-timeout.js";

/** Per-call options of every unary call. */
export interface CallOptions {
  /** Settle with `timeout` after this long, counting the wait for a socket and any resend. @default the client's `callTimeoutMs` (30 s) */
  timeoutMs?: number;
  /** Settles the call with `aborted` when it fires. The host may still carry the call out. */
  signal?: AbortSignal;
}

/** The default of `ClientOptions.callTimeoutMs`. */
export const DEFAULT_CALL_TIMEOUT_MS = 30_000;

/** One call's deadline: a signal that aborts with a typed `timeout` or `aborted` error. */
export interface CallDeadline {
  readonly signal: AbortSignal;
  /**
   * Fires the timeout now if the deadline passed by the clock while its timer could not run (the
   * event loop held, the machine asleep): a call about to be sent is checked, never sent late.
   */
  check(): void;
  /** Clears the timer and the listener on the caller's signal. */
  dispose(): void;
}

/**
 * Joins the caller's signal and the timeout into one signal whose `reason` is a SessionmuxError
 * (`timeout` or `aborted`). `describe` tells, at the moment it fires, why nothing answered;
 * `sent` whether the call was handed to an open socket, carried as `data.sent`: an app must not
 * tell its user "not sent" about a prompt the host may have taken.
 */
export function callDeadline(
  method: string,
  timeoutMs: number,
  signal: AbortSignal | undefined,
  describe: () => string,
  sent: () => boolean,
): CallDeadline {
  const controller = new AbortController();
  const onAbort = () =>
    controller.abort(
      new SessionmuxError("aborted", `${method} was aborted by the caller`, {
        cause: signal?.reason,
        data: { method, sent: sent() },
      }),
    );
  if (signal?.aborted) onAbort();
  else signal?.addEventListener("abort", onAbort, { once: true });
  const onTimeout = () =>
    controller.abort(
      new SessionmuxError("timeout", `${method}: no answer within ${timeoutMs} ms (${describe()})`, {
        data: { method, timeoutMs, sent: sent() },
      }),
    );
  const clearTimer = longTimeout(onTimeout, timeoutMs);
  const at = Date.now() + timeoutMs;
  return {
    signal: controller.signal,
    check: () => {
      if (Date.now() >= at) onTimeout();
    },
    dispose: () => {
      clearTimer();
      signal?.removeEventListener("abort", onAbort);
    },
  };
}
