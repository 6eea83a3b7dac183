import type { Observable, Subscription } from "rxjs";
import { SessionmuxError } from "../../protocol/errors.js";

/** How an Observable is read with `for await`. */
export interface IterateOptions {
  /** Ends the iteration with an `aborted` error. */
  signal?: AbortSignal;
  /** Values allowed to wait for a slow loop body; one more ends it with `slow_consumer`. @default 10_000 */
  maxBuffered?: number;
  /**
   * What the values waiting for a slow loop body may weigh, in characters: a follow's events by
   * their JSON, its opened and reset updates by their epoch; a control mirror by the JSON of the
   * change it took (what did not change it shares with the mirrors before it). Past it the loop
   * ends with `slow_consumer`. @default 64 MiB
   */
  maxBufferedBytes?: number;
}

/** The default of `IterateOptions.maxBuffered`. */
export const DEFAULT_MAX_BUFFERED = 10_000;

/** How much a buffered value weighs against `maxBufferedBytes`. */
export type Weigh<T> = (value: T) => number;

/** An Observable that can also be read with `for await`. */
export type LiveStream<T> = Observable<T> & AsyncIterable<T>;

/** Makes `source` readable with `for await` as well; each loop subscribes on its own. */
export function liveStream<T>(
  source: Observable<T>,
  options: IterateOptions = {},
  weigh?: Weigh<T>,
): LiveStream<T> {
  return Object.assign(source, { [Symbol.asyncIterator]: () => iterate(source, options, weigh) });
}

/**
 * Reads an Observable as an async iterator: subscribes at once, buffers what arrives while the
 * loop body runs (bounded by `maxBuffered`, and by `maxBufferedBytes` of what `weigh` gives),
 * rethrows the Observable's error, ends on complete, and unsubscribes when the loop exits early (`break`, `return`, a throw). Calls of `next()` made
 * before an answer are answered in call order, as an async generator's are; the error reaches
 * one of them, and every later one is done.
 */
export function iterate<T>(
  source: Observable<T>,
  options: IterateOptions = {},
  weigh: Weigh<T> = () => 0,
): AsyncIterableIterator<T> {
  const max = options.maxBuffered ?? DEFAULT_MAX_BUFFERED;
  const maxBytes = options.maxBufferedBytes ?? 64 * 1024 * 1024;
  const buffer: T[] = [];
  /** What each buffered value weighs, in `buffer`'s order, and their sum. */
  const weights: number[] = [];
  let bytes = 0;
  /** `next()` calls waiting for a value, oldest first; only while `buffer` is empty. */
  const waiters: { resolve(r: IteratorResult<T>): void; reject(e: unknown): void }[] = [];
  let ended: { error: unknown } | "complete" | undefined;
  let subscription: Subscription | undefined;

  const end = (outcome: { error: unknown } | "complete"): void => {
    if (ended) return;
    ended = outcome;
    subscription?.unsubscribe();
    options.signal?.removeEventListener("abort", onAbort);
    const pending = waiters.splice(0);
    const first = pending.shift();
    if (!first) return;
    if (outcome === "complete") first.resolve({ value: undefined, done: true });
    else {
      ended = "complete";
      first.reject(outcome.error);
    }
    for (const w of pending) w.resolve({ value: undefined, done: true });
  };
  const onAbort = () =>
    end({
      error: new SessionmuxError("aborted", "the iteration was aborted", { cause: options.signal?.reason }),
    });

  if (options.signal?.aborted) onAbort();
  else {
    options.signal?.addEventListener("abort", onAbort, { once: true });
    subscription = source.subscribe({
      next: (value) => {
        if (ended) return;
        const w = waiters.shift();
        if (w) return w.resolve({ value, done: false });
        const weight = weigh(value);
        // which bound the value would pass: the count's ("") or the weight's ("Bytes")
        // negated so that a bound given as NaN refuses rather than lifts
        const over = !(buffer.length < max) ? "" : !(bytes + weight <= maxBytes) ? "Bytes" : undefined;
        if (over !== undefined) {
          end({
            error: new SessionmuxError(
              "slow_consumer",
              `the loop fell ${over ? `${bytes + weight} bytes` : `${max} values`} behind; raise maxBuffered${over} or read faster`,
              { data: { maxBuffered: max, maxBufferedBytes: maxBytes } },
            ),
          });
        } else {
          buffer.push(value);
          weights.push(weight);
          bytes += weight;
        }
      },
      error: (error: unknown) => end({ error }),
      complete: () => end("complete"),
    });
    if (ended) subscription.unsubscribe();
  }

  return {
    next(): Promise<IteratorResult<T>> {
      if (buffer.length > 0) {
        bytes -= weights.shift() as number;
        return Promise.resolve({ value: buffer.shift() as T, done: false });
      }
      if (ended === "complete") return Promise.resolve({ value: undefined, done: true });
      if (ended) {
        const { error } = ended;
        ended = "complete";
        return Promise.reject(error);
      }
      return new Promise((resolve, reject) => {
        waiters.push({ resolve, reject });
      });
    },
    return(): Promise<IteratorResult<T>> {
      buffer.length = weights.length = bytes = 0;
      end("complete");
      return Promise.resolve({ value: undefined, done: true });
    },
    [Symbol.asyncIterator]() {
      return this;
    },
  };
}
