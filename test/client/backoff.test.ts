import fc from "fast-check";
import { afterEach, describe, expect, it, vi } from "vitest";
import { backoffCeiling, backoffDelay, DEFAULT_BACKOFF } from "../../src/client/backoff.js";

describe("backoff policy", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it("doubles the ceiling from 250 ms and caps it at 10 s", () => {
    const ceilings = Array.from({ length: 10 }, (_, attempt) => backoffCeiling(attempt));
    expect(ceilings).toEqual([250, 500, 1000, 2000, 4000, 8000, 10_000, 10_000, 10_000, 10_000]);
    expect(backoffCeiling(5000)).toBe(10_000);
  });

  it("counts a negative attempt as the first: the ceiling never falls below the base", () => {
    expect(backoffCeiling(-1)).toBe(250);
    expect(backoffCeiling(-30, { baseMs: 40, capMs: 1_000 })).toBe(40);
  });

  it("is full jitter: random()=0 gives 0, random()→1 approaches the ceiling", () => {
    expect(backoffDelay(3, DEFAULT_BACKOFF, () => 0)).toBe(0);
    expect(backoffDelay(3, DEFAULT_BACKOFF, () => 0.5)).toBe(1000);
    expect(backoffDelay(3, DEFAULT_BACKOFF, () => 0.999999)).toBeLessThan(2000);
  });

  it("stays within [0, min(cap, base·2^attempt)) for any attempt, policy and random value", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 2000 }),
        fc.integer({ min: 1, max: 5000 }),
        fc.integer({ min: 1, max: 100_000 }),
        fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }),
        (attempt, baseMs, capMs, r) => {
          const delay = backoffDelay(attempt, { baseMs, capMs }, () => r);
          expect(delay).toBeGreaterThanOrEqual(0);
          expect(delay).toBeLessThanOrEqual(Math.min(capMs, baseMs * 2 ** attempt));
          expect(Number.isFinite(delay)).toBe(true);
        },
      ),
    );
  });

  it("spreads delays over the whole window (jitter), seen through fake timers", async () => {
    vi.useFakeTimers();
    const fired: number[] = [];
    const start = Date.now();
    // 200 retries at attempt 2 (ceiling 1 s) with Math.random: none may fire after 1 s.
    for (let i = 0; i < 200; i++) setTimeout(() => fired.push(Date.now() - start), backoffDelay(2));
    await vi.advanceTimersByTimeAsync(999);
    const early = fired.length;
    await vi.advanceTimersByTimeAsync(1);
    expect(fired).toHaveLength(200);
    expect(early).toBeGreaterThan(0);
    const buckets = new Set(fired.map((ms) => Math.floor(ms / 250)));
    // Full jitter lands in every quarter of the window, not at one point.
    expect([...buckets].sort()).toEqual([0, 1, 2, 3]);
  });
});
