import { Observable, type Subscription } from "rxjs";
import { type BackoffPolicy, backoffDelay, DEFAULT_BACKOFF } from "./backoff.js";
import type { SessionmuxClient } from "./client.js";
import { type ControlMirror, EMPTY_MIRROR, markStale, reduceControl } from "./control-mirror-reducer.js";
import { RemoteStreamCarrierError, shouldRetry } from "./remote-errors.js";

export interface ControlMirrorOptions {
  /** Delay before reopening after a retryable host error such as `slow_consumer`. */
  backoff?: Partial<BackoffPolicy>;
}

/**
 * The host's live state as an Observable mirror (§5 `session.control`): emits after every change,
 * marks itself `stale` while the stream is down, reopens by itself and is replaced by each new
 * baseline; `generationChanged` tells the caller the host restarted. Errors only on terminal errors.
 */
export function controlMirror(
  client: SessionmuxClient,
  options: ControlMirrorOptions = {},
): Observable<ControlMirror> {
  const policy = { ...DEFAULT_BACKOFF, ...options.backoff };
  return new Observable<ControlMirror>((subscriber) => {
    let mirror = EMPTY_MIRROR;
    let inner: Subscription | undefined;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let failures = 0;
    let stopped = false;

    const open = (): void => {
      timer = undefined;
      if (stopped) return;
      inner = client.open("session.control", {}).subscribe({
        next: (item) => {
          if (item.kind === "baseline") failures = 0;
          mirror = reduceControl(mirror, item);
          subscriber.next(mirror);
        },
        error: (error: unknown) => {
          if (error instanceof RemoteStreamCarrierError && !error.retryable) return subscriber.complete();
          if (!shouldRetry(error)) return subscriber.error(error);
          if (mirror.generation !== undefined && !mirror.stale) {
            mirror = markStale(mirror);
            subscriber.next(mirror);
          }
          if (error instanceof RemoteStreamCarrierError) open();
          else timer = setTimeout(open, backoffDelay(failures++, policy));
        },
        complete: () => {
          timer = setTimeout(open, backoffDelay(failures++, policy));
        },
      });
    };

    open();
    return () => {
      stopped = true;
      if (timer !== undefined) clearTimeout(timer);
      inner?.unsubscribe();
    };
  });
}
