import type { Observable, Subscription } from "rxjs";

/**
 * Calls `match` with the first value of `source` that passes `test` (even one replayed during
 * subscription), or `done` if `source` completes first; then unsubscribes. Returns the function
 * that gives up waiting. Plain code rather than `first()`, whose operator chain doubles the rxjs
 * share of a browser bundle.
 */
export function firstMatch<T>(
  source: Observable<T>,
  test: (value: T) => boolean,
  match: (value: T) => void,
  done: () => void,
): () => void {
  let settled = false;
  let subscription: Subscription | undefined;
  subscription = source.subscribe({
    next: (value) => {
      if (settled || !test(value)) return;
      settled = true;
      subscription?.unsubscribe();
      match(value);
    },
    complete: () => {
      if (settled) return;
      settled = true;
      done();
    },
  });
  if (settled) subscription.unsubscribe();
  return () => {
    settled = true;
    subscription?.unsubscribe();
  };
}
