import { afterEach, beforeEach, expect, vi } from "vitest";

/** Fake `setTimeout` for every test of the file that calls it (real timers again after each). */
export function useRetryTimers(): void {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });
}

/** Advances to a millisecond before `ms`, checks nothing opened, then to `ms`: one more open. */
export async function opensAfter(opened: unknown[], ms: number): Promise<void> {
  const before = opened.length;
  await vi.advanceTimersByTimeAsync(ms - 1);
  expect(opened).toHaveLength(before);
  await vi.advanceTimersByTimeAsync(1);
  expect(opened).toHaveLength(before + 1);
}
