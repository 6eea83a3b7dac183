import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { untilStoppedOrGrace } from "../../src/host/stop-grace.js";

/**
 * An agent's run against its stop: the run's own outcome while it settles in time, `"abandoned"`
 * once it was stopped and `graceMs` passed without it settling. No timer outlives the answer.
 */

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

/** A run settled from outside, and what the grace made of it so far. */
function race(graceMs: number, signal: AbortSignal) {
  let settle!: { resolve: (value: string) => void; reject: (err: unknown) => void };
  const run = new Promise<string>((resolve, reject) => {
    settle = { resolve, reject };
  });
  const outcome: { value?: string; error?: unknown } = {};
  untilStoppedOrGrace(run, signal, graceMs).then(
    (value) => {
      outcome.value = value;
    },
    (error: unknown) => {
      outcome.error = error;
    },
  );
  return { ...settle, outcome };
}

describe("untilStoppedOrGrace", () => {
  it("answers the run's value when it is never stopped, and keeps no timer", async () => {
    const stop = new AbortController();
    const r = race(100, stop.signal);
    expect(vi.getTimerCount()).toBe(0);
    r.resolve("done");
    await vi.advanceTimersByTimeAsync(0);
    expect(r.outcome).toEqual({ value: "done" });
    // a stop after the run settled starts nothing
    stop.abort();
    expect(vi.getTimerCount()).toBe(0);
  });

  it("passes the run's failure on", async () => {
    const r = race(100, new AbortController().signal);
    const failure = new Error("model down");
    r.reject(failure);
    await vi.advanceTimersByTimeAsync(0);
    expect(r.outcome).toEqual({ error: failure });
  });

  it("answers abandoned exactly graceMs after the stop, when the run has not settled", async () => {
    const stop = new AbortController();
    const r = race(100, stop.signal);
    await vi.advanceTimersByTimeAsync(1_000);
    expect(r.outcome).toEqual({});
    stop.abort();
    await vi.advanceTimersByTimeAsync(99);
    expect(r.outcome).toEqual({});
    await vi.advanceTimersByTimeAsync(1);
    expect(r.outcome).toEqual({ value: "abandoned" });
    // the run's late failure is swallowed: the answer stands
    r.reject(new Error("late"));
    await vi.advanceTimersByTimeAsync(0);
    expect(r.outcome).toEqual({ value: "abandoned" });
  });

  it("counts the grace from the call when the signal was already aborted", async () => {
    const stop = new AbortController();
    stop.abort();
    const r = race(50, stop.signal);
    expect(vi.getTimerCount()).toBe(1);
    await vi.advanceTimersByTimeAsync(49);
    expect(r.outcome).toEqual({});
    await vi.advanceTimersByTimeAsync(1);
    expect(r.outcome).toEqual({ value: "abandoned" });
  });

  it("answers the run's own outcome when it settles within the grace, and clears the grace timer", async () => {
    const stop = new AbortController();
    const r = race(100, stop.signal);
    stop.abort();
    expect(vi.getTimerCount()).toBe(1);
    await vi.advanceTimersByTimeAsync(60);
    r.resolve("cancelled in time");
    await vi.advanceTimersByTimeAsync(0);
    expect(r.outcome).toEqual({ value: "cancelled in time" });
    expect(vi.getTimerCount()).toBe(0);

    const failing = new AbortController();
    const f = race(100, failing.signal);
    failing.abort();
    const failure = new Error("stopped badly");
    f.reject(failure);
    await vi.advanceTimersByTimeAsync(0);
    expect(f.outcome).toEqual({ error: failure });
    expect(vi.getTimerCount()).toBe(0);
  });

  it("forgets a signal it no longer waits on, also when the run failed", async () => {
    const stop = new AbortController();
    const r = race(100, stop.signal);
    r.reject(new Error("failed early"));
    await vi.advanceTimersByTimeAsync(0);
    stop.abort();
    expect(vi.getTimerCount()).toBe(0);
  });
});
