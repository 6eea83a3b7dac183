import { BehaviorSubject, config, firstValueFrom, Subject } from "rxjs";
import { describe, expect, it } from "vitest";
import { broadcast } from "../../src/client/broadcast.js";

/** What one subscriber saw, `|` for completion. */
function watch<T>(source: { subscribe: Subject<T>["subscribe"] }) {
  const seen: (T | "|")[] = [];
  const subscription = source.subscribe({ next: (v) => seen.push(v), complete: () => seen.push("|") });
  return { seen, subscription };
}

/** One script played on a broadcast and on the rxjs subject it stands for. */
function play(withCurrent: boolean) {
  let current = 0;
  const ours = broadcast<number>(withCurrent ? (s) => s.next(current) : undefined);
  const theirs = withCurrent ? new BehaviorSubject(0) : new Subject<number>();
  const runs = [ours, theirs].map((source) => {
    const next = (v: number) => {
      if (source === ours) {
        current = v;
        ours.next(v);
      } else theirs.next(v);
    };
    const observable = source === ours ? ours.observable : theirs;
    const early = watch(observable);
    next(1);
    // one that leaves during a value and one that joins during it
    let late: ReturnType<typeof watch<number>> | undefined;
    const leaving = watch(observable);
    const joining = observable.subscribe((v) => {
      if (v === 2 && !late) late = watch(observable);
    });
    leaving.subscription.unsubscribe();
    next(2);
    next(3);
    joining.unsubscribe();
    if (source === ours) ours.complete();
    else theirs.complete();
    next(4);
    const after = watch(observable);
    return { early: early.seen, leaving: leaving.seen, late: late?.seen, after: after.seen };
  });
  return runs;
}

describe("broadcast stands for rxjs's subjects", () => {
  it("as Subject: values after subscribing, in order; completion to all, at once to a late subscriber", () => {
    const [ours, theirs] = play(false);
    expect(ours).toEqual(theirs);
    expect(ours!.early).toEqual([1, 2, 3, "|"]);
    expect(ours!.after).toEqual(["|"]);
  });

  it("as BehaviorSubject: a subscriber is handed the current value first; nothing after completion", () => {
    const [ours, theirs] = play(true);
    expect(ours).toEqual(theirs);
    expect(ours!.early).toEqual([0, 1, 2, 3, "|"]);
    expect(ours!.late).toEqual([2, 3, "|"]);
    expect(ours!.after).toEqual(["|"]);
  });

  it("an error thrown by one subscriber reaches neither the sender nor the others", async () => {
    const source = broadcast<number>();
    const reported: unknown[] = [];
    config.onUnhandledError = (error) => reported.push(error);
    try {
      source.observable.subscribe(() => {
        throw new Error("subscriber bug");
      });
      const second = firstValueFrom(source.observable);
      expect(() => source.next(7)).not.toThrow();
      expect(await second).toBe(7);
      // rxjs reports it on a timer, as it does for its own subjects
      await new Promise((resolve) => setTimeout(resolve, 10));
    } finally {
      config.onUnhandledError = null;
    }
    expect(reported).toEqual([new Error("subscriber bug")]);
  });
});
