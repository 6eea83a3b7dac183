import { Observable } from "rxjs";
import type { ItemOf } from "../../protocol/index.js";
import { type BackoffPolicy, DEFAULT_BACKOFF } from "./backoff.js";
import { BaselineAssembly } from "./baseline-assembly.js";
import type { SessionmuxClientApi } from "./client.js";
import {
  type ControlMirror,
  EMPTY_MIRROR,
  markStale,
  reduceControl,
  removeSession,
} from "./control-mirror-reducer.js";
import { RemoteError } from "./remote-errors.js";
import { superviseStream } from "./stream-supervisor.js";

export interface ControlMirrorOptions {
  /** Delay before reopening after a retryable host error such as `slow_consumer`. */
  backoff?: Partial<BackoffPolicy>;
}

/**
 * The host's live state as an Observable mirror (§5 `session.control`): emits after every change,
 * marks itself `stale` while the stream is down, reopens by itself and is replaced by each new
 * baseline; `generationChanged` tells the caller the host restarted (one serving its own store:
 * hosts sharing one database give one generation, so a socket moving between them is no restart).
 * Recovery follows
 * `superviseStream`; it errors with a terminal `RemoteError` (`persistence_failure` included).
 * Whenever it ends (error or completion), its last value is stale.
 *
 * The baseline is asked for in parts of at most 64 KiB (`baselineParts`), which a slow link
 * carries within the keepalive's wait, and applied once its last part arrived. A host from before
 * parts refuses the field; the stream is then opened without it, the baseline in one item.
 */
export function controlMirror(
  client: SessionmuxClientApi,
  options: ControlMirrorOptions = {},
): Observable<ControlMirror> {
  const policy = { ...DEFAULT_BACKOFF, ...options.backoff };
  return new Observable<ControlMirror>((subscriber) => {
    let mirror = EMPTY_MIRROR;
    const assembly = new BaselineAssembly();
    let inParts = true;
    const stale = (): void => {
      if (mirror.generation === undefined || mirror.stale) return;
      mirror = markStale(mirror);
      subscriber.next(mirror);
    };
    // by hand rather than with rxjs's catchError, which alone added 2 KB to the browser bundle; the
    // stream opened again is subscribed with `inner` itself, so it ends when `inner` does
    const open = (): Observable<ItemOf<"session.control">> =>
      new Observable((inner) =>
        client.open("session.control", inParts ? { baselineParts: true } : {}).subscribe({
          next: (item) => inner.next(item),
          error: (error: unknown) => {
            if (!inParts || !refusesBaselineParts(error)) return inner.error(error);
            inParts = false;
            client.open("session.control", {}).subscribe(inner);
          },
          complete: () => inner.complete(),
        }),
      );
    const offRemoved = client.on("session.removed", ({ sessionId }) => {
      if (!mirror.projections[sessionId]) return;
      mirror = removeSession(mirror, sessionId);
      subscriber.next(mirror);
    });
    const stop = superviseStream(
      subscriber,
      open,
      {
        next: (item, control) => {
          let change = item;
          if (item.kind === "baseline") {
            const whole = assembly.add(item);
            if (whole === undefined) return;
            if (whole instanceof Error) return control.fail(whole);
            change = whole;
            control.progressed();
          }
          mirror = reduceControl(mirror, change);
          subscriber.next(mirror);
        },
        interrupted: () => {
          assembly.reset();
          stale();
        },
        // the last value a subscriber holds must not claim to be live once nothing keeps it so
        ended: stale,
      },
      { policy, state$: client.state$, generation: () => client.hello?.generation },
    );
    return () => {
      offRemoved();
      stop();
    };
  });
}

/** A host from before `baselineParts` refuses it as an unknown field of `session.control`. */
function refusesBaselineParts(error: unknown): boolean {
  return (
    error instanceof RemoteError &&
    error.code === "bad_request" &&
    (error.data as { field?: unknown } | undefined)?.field === "/baselineParts"
  );
}
