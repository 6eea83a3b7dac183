import { Observable, type Subscriber } from "rxjs";

/** One source of values, observed by any number of subscribers. */
export interface Broadcast<T> {
  /** Hands the value to every subscriber, oldest first; nothing once completed. */
  next(value: T): void;
  /** Completes every subscriber; a later subscriber is completed at once and replayed nothing. */
  complete(): void;
  readonly observable: Observable<T>;
}

/**
 * What the client needs of rxjs's `Subject` (and, with `greet`, of `BehaviorSubject`: `greet`
 * hands a new subscriber the current value) in a few lines: `Subject` and the classes it brings
 * are a sizeable share of the browser bundle. Subscribers are rxjs subscribers, so an error thrown
 * by one is reported by rxjs and does not reach the others.
 */
export function broadcast<T>(greet?: (subscriber: Subscriber<T>) => void): Broadcast<T> {
  let subscribers: Set<Subscriber<T>> | undefined = new Set();
  return {
    // a copy: who subscribes or leaves while a value is handed out does not change who gets it
    next: (value) => {
      for (const subscriber of [...(subscribers ?? [])]) subscriber.next(value);
    },
    complete: () => {
      const last = subscribers;
      subscribers = undefined;
      for (const subscriber of last ?? []) subscriber.complete();
    },
    observable: new Observable<T>((subscriber) => {
      const current = subscribers;
      if (!current) return subscriber.complete();
      current.add(subscriber);
      greet?.(subscriber);
      return () => current.delete(subscriber);
    }),
  };
}
