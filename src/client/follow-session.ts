import { Observable } from "rxjs";
import { type BackoffPolicy, DEFAULT_BACKOFF } from "./backoff.js";
import type { SessionmuxClientApi } from "./client.js";
import {
  applyFollowItem,
  type FollowCursor,
  type FollowUpdate,
  initialCursor,
  interruptedCursor,
  reopenParams,
} from "./follow-cursor.js";
import { superviseStream } from "./stream-supervisor.js";

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
 * seq, drops anything at or below it, passes `reset` on so the caller drops its mirror, and says
 * `interrupted` (cursor no longer `caughtUp`) as soon as the stream is lost. Recovery
 * follows `superviseStream`: it waits through a refused token until `setToken`, completes when the
 * client closes (or the host ends the stream unasked), errors with a terminal `RemoteError`
 * (`persistence_failure` included).
 */
export function followSession(
  client: SessionmuxClientApi,
  sessionId: string,
  options: FollowOptions = {},
): Observable<FollowUpdate> {
  const policy = { ...DEFAULT_BACKOFF, ...options.backoff };
  return new Observable<FollowUpdate>((subscriber) => {
    let cursor: FollowCursor = initialCursor(options.afterSeq ?? 0, options.epoch);
    /** Set from a loss until the reopened stream delivers, so one loss is reported once. */
    let interrupted = false;
    return superviseStream(
      subscriber,
      () => client.open("session.follow", reopenParams(sessionId, cursor)),
      {
        next: (item, control) => {
          interrupted = false;
          const step = applyFollowItem(cursor, item);
          // The host promises no gaps; if one shows, reopening from the cursor repairs it.
          if (!step.ok) return control.reopen();
          cursor = step.cursor;
          if (item.kind === "events") control.progressed();
          if (step.update) subscriber.next(step.update);
        },
        // Without this the last update's `caughtUp: true` would stand while the socket is down.
        interrupted: () => {
          if (interrupted) return;
          interrupted = true;
          cursor = interruptedCursor(cursor);
          subscriber.next({ kind: "interrupted", cursor });
        },
      },
      { policy, state$: client.state$, generation: () => client.hello?.generation },
    );
  });
}
