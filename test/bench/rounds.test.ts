import { describe, expect, it } from "vitest";
import { newScenario, ratioAgainst, roundRatios } from "../../bench/harness/result.js";
import { type Measurement, measureRounds } from "../../bench/harness/rounds.js";
import { median } from "../../bench/harness/stats.js";

describe("benchmark rounds", () => {
  it("rotates the subjects' order every round and discards warm-up rounds", async () => {
    const order: string[] = [];
    const result = newScenario("s", "S", "ops/s", true);
    const subject = (name: string) => ({
      name,
      run: async (): Promise<Measurement> => {
        order.push(name);
        return { value: 1 };
      },
    });
    await measureRounds(result, [subject("A"), subject("B"), subject("C")], { rounds: 3, warmup: 1 });
    expect(order.join("")).toBe("ABC" + "BCA" + "CAB" + "ABC");
    expect(result.rounds).toEqual({ A: [1, 1, 1], B: [1, 1, 1], C: [1, 1, 1] });
  });

  it("pairs ratios by round, so a slow round counts against both sides", async () => {
    // round speeds 1, 10, 1: each subject's figure swings 10×, the per-round ratio stays 2×
    const speed = [1, 10, 1];
    const runs = { ours: 0, theirs: 0 };
    const result = newScenario("s", "S", "ops/s", true);
    await measureRounds(
      result,
      [
        { name: "sessionmux", run: async () => ({ value: 2 * speed[runs.ours++]! }) },
        { name: "raw", run: async () => ({ value: speed[runs.theirs++]! }) },
      ],
      { rounds: 3, warmup: 0 },
    );
    expect(roundRatios(result, "raw")).toEqual({ median: 2, min: 2, max: 2, rounds: 3 });
    expect(ratioAgainst(result, "raw")).toBe(2);
    // lower-is-better scenarios invert the ratio
    const latency = { ...result, higherIsBetter: false };
    expect(ratioAgainst(latency, "raw")).toBe(0.5);
  });

  it("repeats every subject as often as the slowest needs for the minimum CPU, and combines the work", async () => {
    const calls = { slow: 0, fast: 0 };
    const result = newScenario("s", "S", "ops/s", true);
    await measureRounds(
      result,
      [
        // 250 ms of CPU per run: four runs reach 1,000 ms
        {
          name: "slow",
          run: async () => {
            calls.slow++;
            return { value: 400, cpuMs: 250, count: 100 };
          },
        },
        {
          name: "fast",
          run: async () => {
            calls.fast++;
            return { value: 1000, cpuMs: 100, count: 100 };
          },
        },
      ],
      { rounds: 2, warmup: 1, minCpuMs: 1_000 },
    );
    expect(calls).toEqual({ slow: 1 + 2 * 4, fast: 1 + 2 * 4 });
    expect(result.rounds).toEqual({ slow: [400, 400], fast: [1000, 1000] });
  });

  it("records a failing subject and keeps measuring the others", async () => {
    const result = newScenario("s", "S", "ops/s", true);
    await measureRounds(
      result,
      [
        { name: "ok", run: async () => ({ value: 3 }) },
        {
          name: "broken",
          run: async () => {
            throw new Error("refused");
          },
        },
      ],
      { rounds: 3, warmup: 0 },
    );
    expect(result.errors).toEqual(["broken: refused"]);
    expect(result.figures.map((f) => f.subject)).toEqual(["ok"]);
    expect(Number.isNaN(ratioAgainst(result, "broken", "ok"))).toBe(true);
  });

  it("takes the median of odd and even counts", () => {
    expect(median([5, 1, 3])).toBe(3);
    expect(median([4, 1, 3, 2])).toBe(2.5);
    expect(Number.isNaN(median([]))).toBe(true);
  });
});
