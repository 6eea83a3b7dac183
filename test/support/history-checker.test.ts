import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { checkHistory, formatCounts, isClean, sumCounts } from "./history-checker.js";

const range = (from: number, to: number): number[] =>
  Array.from({ length: to - from + 1 }, (_, i) => from + i);

describe("history checker", () => {
  it("accepts an exact follower of a contiguous log", () => {
    const report = checkHistory({ acknowledged: range(1, 50), log: range(1, 60), observed: range(1, 60) });
    expect(report).toMatchObject({
      acked: 50,
      lost: 0,
      dup: 0,
      gap: 0,
      reorder: 0,
      phantom: 0,
      resurrected: 0,
    });
    expect(isClean(report)).toBe(true);
  });

  it("counts an acknowledged seq missing from the log as lost, and the hole as a gap", () => {
    const report = checkHistory({ acknowledged: [1, 2, 3], log: [1, 3] });
    expect(report.lost).toBe(1);
    expect(report.examples.lost).toEqual([2]);
    expect(report.gap).toBe(1);
  });

  it("counts an acknowledged seq a complete follower never saw as lost, once", () => {
    const report = checkHistory({ acknowledged: [1, 2, 3], log: [1, 2, 3], observed: [1, 2] });
    expect(report.lost).toBe(1);
    expect(report.gap).toBe(0);
  });

  it("does not count undelivered seqs as lost for a follower that did not finish", () => {
    const report = checkHistory({ acknowledged: [1, 2, 3], observed: [1, 2], complete: false });
    expect(isClean(report)).toBe(true);
  });

  it("counts duplicates, reorders, skipped seqs and phantoms separately", () => {
    const report = checkHistory({ acknowledged: [1, 2], log: range(1, 6), observed: [1, 2, 2, 4, 3, 6, 9] });
    expect(report.dup).toBe(1);
    expect(report.reorder).toBe(1);
    // 3 skipped after 2, 5 after 4, 7 and 8 after 6
    expect(report.gap).toBe(4);
    expect(report.phantom).toBe(1);
    expect(report.examples.phantom).toEqual([9]);
  });

  it("counts every seq after the tombstone as resurrected", () => {
    const report = checkHistory({ acknowledged: [1, 7], log: [1, 7], afterTombstone: [7, 8, 8] });
    expect(report.resurrected).toBe(2);
    expect(isClean(report)).toBe(false);
  });

  it("refuses an empty history unless told it may be empty", () => {
    expect(() => checkHistory({})).toThrow(/empty history/);
    expect(() => checkHistory({ acknowledged: [], log: [], observed: [] })).toThrow(/empty history/);
    expect(isClean(checkHistory({ acknowledged: [], log: [], observed: [], allowEmpty: true }))).toBe(true);
  });

  it("refuses acknowledged seqs with nothing to check them against", () => {
    expect(() => checkHistory({ acknowledged: [1, 2] })).toThrow(/incomplete history/);
    expect(() => checkHistory({ acknowledged: [1], afterTombstone: [] })).toThrow(/incomplete history/);
  });

  it("sums and formats counts in the one torture line format", () => {
    const a = checkHistory({ acknowledged: [1], log: [1], observed: [1] });
    const b = checkHistory({ acknowledged: [1, 2], log: [1], observed: [1, 1] });
    const total = sumCounts([a, b]);
    expect(formatCounts("demo", 2, total)).toBe(
      "torture demo: runs=2 acked=3 lost=1 dup=1 gap=0 reorder=0 phantom=0 resurrected=0",
    );
  });

  it("finds no fault in any exact delivery and some fault in any corrupted one (property)", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 200 }),
        fc.integer({ min: 0, max: 3 }),
        fc.nat(),
        (head, corruption, pick) => {
          const exact = range(1, head);
          expect(isClean(checkHistory({ acknowledged: exact, log: exact, observed: exact }))).toBe(true);
          const observed = [...exact];
          const at = pick % head;
          if (corruption === 0) observed.splice(at, 1);
          else if (corruption === 1) observed.splice(at, 0, observed[at]!);
          else if (corruption === 2) observed.push(head + 1);
          else observed.splice(at, 0, head + 5);
          expect(isClean(checkHistory({ acknowledged: exact, log: exact, observed }))).toBe(false);
        },
      ),
      { numRuns: 200 },
    );
  });
});
