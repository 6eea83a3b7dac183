import { Observable, type Subscription } from "rxjs";
import { type BackoffPolicy, backoffDelay, DEFAULT_BACKOFF } from "./backoff.js";
import type { SessionmuxClient } from "./client.js";
import {
  applyFollowItem,
  type FollowCursor,
  type FollowUpdate,
  initialCursor,
  reopenParams,
} from "./follow-cursor.js";
import { RemoteStreamCarrierError, shouldRetry } from "./remote-errors.js";

export interface FollowOptions {
  /** The last seq the caller already has. @default 0 */
  afterSeq?: number;
  /** The epoch `afterSeq` belongs to; a stale one makes the host send `reset`. */
  epoch?: string;
  /** Delay before reopening after a retryable host error (carrier losses wait on the reconnect loop). */
  backoff?: Partial<BackoffPolicy>;
}

/**
 * Follows a session's log across disconnects and host restarts (§5): reopens from the last applied
 * seq, drops anything at or below it, passes `reset` on so the caller drops its mirror. Completes
 * only when the client is closed; errors only with a terminal `RemoteError`.
 */
export function followSession(
  client: SessionmuxClient,
  sessionId: string,
  options: FollowOptions = {},
): Observable<FollowUpdate> {
  const policy = { ...DEFAULT_BACKOFF, ...options.backoff };
  return new Observable<FollowUpdate>((subscriber) => {
    let cursor: FollowCursor = initialCursor(options.afterSeq ?? 0, options.epoch);
    let inner: Subscription | undefined;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let failures = 0;
    let stopped = false;

    const open = (): void => {
      timer = undefined;
      if (stopped) return;
      inner = client.open("session.follow", reopenParams(sessionId, cursor)).subscribe({
        next: (item) => {
          const step = applyFollowItem(cursor, item);
          if (!step.ok) {
            // The host promises no gaps; if one shows, reopening from the cursor repairs it.
            inner?.unsubscribe();
            retry(true);
            return;
          }
          cursor = step.cursor;
          if (item.kind === "events") failures = 0;
          if (step.update) subscriber.next(step.update);
        },
        error: (error: unknown) => {
          if (error instanceof RemoteStreamCarrierError && !error.retryable) subscriber.complete();
          else if (shouldRetry(error)) retry(!(error instanceof RemoteStreamCarrierError));
          else subscriber.error(error);
        },
        // The host ends a follow only after our `close`; an unexpected end is treated as a loss.
        complete: () => retry(true),
      });
    };

    const retry = (delayed: boolean): void => {
      if (stopped) return;
      if (delayed) timer = setTimeout(open, backoffDelay(failures++, policy));
      else open();
    };

    open();
    return () => {
      stopped = true;
      if (timer !== undefined) clearTimeout(timer);
      inner?.unsubscribe();
    };
  });
}
