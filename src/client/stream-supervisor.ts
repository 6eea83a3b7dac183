import type { Observable, Subscriber, Subscription } from "rxjs";
import type { SessionmuxError } from "../../protocol/errors.js";
import { type BackoffPolicy, backoffDelay } from "./backoff.js";
import type { ConnectionState } from "./connection-state.js";
import { firstMatch } from "./first-match.js";
import { streamRecovery } from "./stream-recovery.js";

/** What an item handler may ask of the supervisor. */
export interface SupervisorControl {
  /** Drops the current stream and reopens it after a backoff delay (a client-side repair). */
  reopen(): void;
  /** The stream made progress: the backoff and the isolated retry start afresh. */
  progressed(): void;
  /** The host broke the protocol: the stream fails with `error`, as with a terminal host error. */
  fail(error: SessionmuxError): void;
}

export interface SupervisorHooks<I> {
  next(item: I, control: SupervisorControl): void;
  /** Called when the stream was lost and will be reopened. */
  interrupted?(): void;
  /**
   * Called once when the stream ends on its own (terminal error, completion, the client closed),
   * just before the subscriber hears of it; not when the caller unsubscribes.
   */
  ended?(): void;
}

/** Where the supervisor learns the host generation (§3 `hello`). */
export interface SupervisorOptions {
  readonly policy: BackoffPolicy;
  /** The connection state (an `open` one carries the `hello`), replaying the current one; completes when the client closes. */
  readonly state$: Observable<ConnectionState>;
  /** The generation of the open socket, if one is open. */
  readonly generation: () => string | undefined;
}

/**
 * Keeps one logical stream open until unsubscribed, by the rules of `streamRecovery`: after a
 * carrier loss it reopens on the next socket; after a retryable host error it retries once per
 * host generation after a backoff delay, then waits for the next generation; `persistence_failure`
 * and non-retryable errors are published as the stream's error; a refused connection waits for
 * the next open socket (after `setToken`); an `end` the caller did not ask for completes it.
 * Returns the teardown.
 */
export function superviseStream<I, O>(
  subscriber: Subscriber<O>,
  open: () => Observable<I>,
  hooks: SupervisorHooks<I>,
  options: SupervisorOptions,
): () => void {
  let inner: Subscription | undefined;
  let stopWaiting: (() => void) | undefined;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let failures = 0;
  /** The generation whose one isolated retry was spent. */
  let retriedIn: string | undefined;
  let stopped = false;

  const later = (): void => {
    timer = setTimeout(start, backoffDelay(failures++, options.policy));
  };
  const control: SupervisorControl = {
    reopen: () => {
      inner?.unsubscribe();
      hooks.interrupted?.();
      later();
    },
    progressed: () => {
      failures = 0;
      retriedIn = undefined;
    },
    fail: (error) => failed(error),
  };
  const complete = (): void => {
    hooks.ended?.();
    subscriber.complete();
  };
  /**
   * Starts again on the next `hello` whose generation is not `seen` (any, if undefined), or once
   * the host turns out to speak another protocol version: the stream then fails with that.
   */
  const untilHello = (seen: string | undefined): void => {
    stopWaiting = firstMatch(
      options.state$,
      (s) => (s.name === "open" ? s.hello.generation !== seen : s.name === "incompatible"),
      () => start(),
      // The client closed before the host came back.
      complete,
    );
  };
  const failed = (error: unknown): void => {
    if (stopped) return;
    const recovery = streamRecovery(error);
    if (recovery === "complete") complete();
    else if (recovery === "fail") {
      hooks.ended?.();
      subscriber.error(error);
    } else {
      hooks.interrupted?.();
      const generation = options.generation();
      if (recovery === "await-open") untilHello(undefined);
      else if (recovery === "reconnect" || generation === undefined) start();
      else if (retriedIn !== generation) {
        retriedIn = generation;
        later();
      } else untilHello(generation);
    }
  };
  function start(): void {
    timer = undefined;
    if (stopped) return;
    inner = open().subscribe({
      next: (item) => hooks.next(item, control),
      error: failed,
      // The host ends follow and control only after our `close` or at its own will: not a loss.
      complete,
    });
  }

  start();
  return () => {
    stopped = true;
    if (timer !== undefined) clearTimeout(timer);
    stopWaiting?.();
    inner?.unsubscribe();
  };
}
