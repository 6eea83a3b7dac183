import { BehaviorSubject, of, Subject } from "rxjs";
import { describe, expect, it } from "vitest";
import { firstMatch } from "../../src/client/first-match.js";

function recorder() {
  const matched: number[] = [];
  let done = 0;
  return {
    matched,
    get done() {
      return done;
    },
    match: (v: number) => matched.push(v),
    complete: () => {
      done += 1;
    },
  };
}
const positive = (v: number) => v > 0;

describe("firstMatch waits for one value, then lets go of its source", () => {
  it("a match replayed during subscription is taken once and the source is left unobserved", () => {
    const source = new BehaviorSubject(1);
    const r = recorder();
    firstMatch(source, positive, r.match, r.complete);
    expect(source.observed).toBe(false);
    source.next(2);
    source.complete();
    expect(r.matched).toEqual([1]);
    expect(r.done).toBe(0);
  });

  it("a source that matches and then completes while subscribing calls match and never done", () => {
    const r = recorder();
    firstMatch(of(0, 3, 4), positive, r.match, r.complete);
    expect(r.matched).toEqual([3]);
    expect(r.done).toBe(0);
  });

  it("a later match is taken once and unsubscribes", () => {
    const source = new Subject<number>();
    const r = recorder();
    firstMatch(source, positive, r.match, r.complete);
    source.next(-1);
    expect(source.observed).toBe(true);
    source.next(5);
    expect(source.observed).toBe(false);
    expect(r.matched).toEqual([5]);
  });

  it("giving up stops listening: neither a later match nor completion is reported", () => {
    const source = new Subject<number>();
    const r = recorder();
    const stop = firstMatch(source, positive, r.match, r.complete);
    stop();
    expect(source.observed).toBe(false);
    source.next(1);
    source.complete();
    expect(r.matched).toEqual([]);
    expect(r.done).toBe(0);
  });

  it("a source that completes without a match calls done once", () => {
    const source = new Subject<number>();
    const r = recorder();
    firstMatch(source, positive, r.match, r.complete);
    source.next(0);
    source.complete();
    expect(r.matched).toEqual([]);
    expect(r.done).toBe(1);
  });
});
