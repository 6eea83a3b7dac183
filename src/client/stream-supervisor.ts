import type { Observable, Subscriber, Subscription } from "rxjs";
import { type BackoffPolicy, backoffDelay } from "./backoff.js";
import { RemoteStreamCarrierError, shouldRetry } from "./remote-errors.js";

/** What an item handler may ask of the supervisor. */
export interface SupervisorControl {
  /** Drops the current stream and reopens it after a backoff delay. */
  reopen(): void;
  /** The stream made progress: the next failure starts the backoff from the beginning. */
  progressed(): void;
}

export interface SupervisorHooks<I> {
  next(item: I, control: SupervisorControl): void;
  /** Called when the stream was lost and will be reopened. */
  interrupted?(): void;
}

/**
 * Keeps one logical stream open until unsubscribed: after a carrier loss it reopens at once (the
 * connection's reconnect loop paces it), after a retryable host error or an unexpected end it
 * waits a backoff delay; it completes when the client closes and errors on a terminal error.
 * Returns the teardown.
 */
export function superviseStream<I, O>(
  subscriber: Subscriber<O>,
  open: () => Observable<I>,
  hooks: SupervisorHooks<I>,
  policy: BackoffPolicy,
): () => void {
  let inner: Subscription | undefined;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let failures = 0;
  let stopped = false;

  const retry = (delayed: boolean): void => {
    if (stopped) return;
    hooks.interrupted?.();
    if (delayed) timer = setTimeout(start, backoffDelay(failures++, policy));
    else start();
  };
  const control: SupervisorControl = {
    reopen: () => {
      inner?.unsubscribe();
      retry(true);
    },
    progressed: () => {
      failures = 0;
    },
  };
  function start(): void {
    timer = undefined;
    if (stopped) return;
    inner = open().subscribe({
      next: (item) => hooks.next(item, control),
      error: (error: unknown) => {
        if (error instanceof RemoteStreamCarrierError && !error.retryable) subscriber.complete();
        else if (shouldRetry(error)) retry(!(error instanceof RemoteStreamCarrierError));
        else subscriber.error(error);
      },
      // The host ends a stream only after our `close`; an unexpected end is treated as a loss.
      complete: () => retry(true),
    });
  }

  start();
  return () => {
    stopped = true;
    if (timer !== undefined) clearTimeout(timer);
    inner?.unsubscribe();
  };
}
