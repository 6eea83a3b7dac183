import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { LONGEST_TIMER_MS, longTimeout } from "../../src/client/long-timeout.js";

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

describe("longTimeout", () => {
  it("fires once, after the delay itself, for a delay within the longest timer", () => {
    const run = vi.fn();
    longTimeout(run, 250);
    vi.advanceTimersByTime(249);
    expect(run).not.toHaveBeenCalled();
    vi.advanceTimersByTime(1);
    expect(run).toHaveBeenCalledTimes(1);
    vi.advanceTimersByTime(10_000);
    expect(run).toHaveBeenCalledTimes(1);
  });

  it("waits out a delay past the longest timer in steps, firing at the delay, not after 1 ms", () => {
    const run = vi.fn();
    const delay = 2 * LONGEST_TIMER_MS + 5;
    longTimeout(run, delay);
    vi.advanceTimersByTime(1);
    expect(run).not.toHaveBeenCalled();
    vi.advanceTimersByTime(LONGEST_TIMER_MS);
    vi.advanceTimersByTime(LONGEST_TIMER_MS);
    expect(run).not.toHaveBeenCalled();
    vi.advanceTimersByTime(3);
    expect(run).not.toHaveBeenCalled();
    vi.advanceTimersByTime(1);
    expect(run).toHaveBeenCalledTimes(1);
  });

  it("the longest timer itself is one step", () => {
    const run = vi.fn();
    longTimeout(run, LONGEST_TIMER_MS);
    vi.advanceTimersByTime(LONGEST_TIMER_MS - 1);
    expect(run).not.toHaveBeenCalled();
    vi.advanceTimersByTime(1);
    expect(run).toHaveBeenCalledTimes(1);
  });

  it("a delay that is not finite never fires and sets no timer", () => {
    const run = vi.fn();
    longTimeout(run, Number.POSITIVE_INFINITY);
    longTimeout(run, Number.NaN);
    expect(vi.getTimerCount()).toBe(0);
    vi.advanceTimersByTime(3 * LONGEST_TIMER_MS);
    expect(run).not.toHaveBeenCalled();
  });

  it("cleared, it never fires, whichever step it is in", () => {
    const early = vi.fn();
    longTimeout(early, 1_000)();
    const late = vi.fn();
    const clear = longTimeout(late, 3 * LONGEST_TIMER_MS);
    vi.advanceTimersByTime(LONGEST_TIMER_MS + 10);
    clear();
    vi.advanceTimersByTime(3 * LONGEST_TIMER_MS);
    expect(early).not.toHaveBeenCalled();
    expect(late).not.toHaveBeenCalled();
    expect(vi.getTimerCount()).toBe(0);
  });
});
