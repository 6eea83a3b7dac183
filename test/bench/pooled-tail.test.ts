import { describe, expect, it } from "vitest";
import { pooledTail } from "../../bench/harness/pooled-tail.js";

const range = (from: number, count: number) => Array.from({ length: count }, (_, i) => from + i);

describe("a tail percentile over the measured rounds pooled", () => {
  it("leaves the warm-up rounds out and takes the percentile of all other samples at once", () => {
    // warm-up: one huge sample; then two rounds of 100 samples each, 1..100 and 101..200
    const figures = pooledTail({ a: [[1_000_000], range(1, 100), range(101, 100)] }, 99, 1);
    // nearest rank 198 of 200
    expect(figures).toEqual([
      {
        subject: "a",
        value: 198,
        detail: "p99 of 200 samples pooled from 2 rounds (per round 99.00–199.00 ms)",
      },
    ]);
  });

  it("is not moved by one round's hiccup the way that round's own p99 is", () => {
    const quiet = range(1, 100);
    // one round whose two slowest samples stalled
    const stalled = [...range(1, 98), 500, 600];
    const rounds = [[], quiet, quiet, quiet, stalled, quiet, quiet, quiet];
    const [figure] = pooledTail({ a: rounds }, 99, 1);
    expect(figure!.value).toBe(100);
    expect(figure!.detail).toContain("per round 99.00–500.00 ms");
  });

  it("gives each subject its own figure", () => {
    const figures = pooledTail({ a: [[], [1, 2, 3]], b: [[], [4, 5, 6]] }, 50, 1);
    expect(figures.map((f) => [f.subject, f.value])).toEqual([
      ["a", 2],
      ["b", 5],
    ]);
  });
});
