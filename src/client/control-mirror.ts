import { Observable } from "rxjs";
import { type BackoffPolicy, DEFAULT_BACKOFF } from "./backoff.js";
import type { SessionmuxClient } from "./client.js";
import { type ControlMirror, EMPTY_MIRROR, markStale, reduceControl } from "./control-mirror-reducer.js";
import { superviseStream } from "./stream-supervisor.js";

export interface ControlMirrorOptions {
  /** Delay before reopening after a retryable host error such as `slow_consumer`. */
  backoff?: Partial<BackoffPolicy>;
}

/**
 * The host's live state as an Observable mirror (§5 `session.control`): emits after every change,
 * marks itself `stale` while the stream is down, reopens by itself and is replaced by each new
 * baseline; `generationChanged` tells the caller the host restarted. Recovery follows
 * `superviseStream`; it errors with a terminal `RemoteError` (`persistence_failure` included).
 */
export function controlMirror(
  client: SessionmuxClient,
  options: ControlMirrorOptions = {},
): Observable<ControlMirror> {
  const policy = { ...DEFAULT_BACKOFF, ...options.backoff };
  return new Observable<ControlMirror>((subscriber) => {
    let mirror = EMPTY_MIRROR;
    return superviseStream(
      subscriber,
      () => client.open("session.control", {}),
      {
        next: (item, control) => {
          if (item.kind === "baseline") control.progressed();
          mirror = reduceControl(mirror, item);
          subscriber.next(mirror);
        },
        interrupted: () => {
          if (mirror.generation === undefined || mirror.stale) return;
          mirror = markStale(mirror);
          subscriber.next(mirror);
        },
      },
      { policy, hello$: client.hello$, generation: () => client.hello?.generation },
    );
  });
}
