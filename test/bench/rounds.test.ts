import { describe, expect, it } from "vitest";
import { newScenario, ratioAgainst, roundRatios } from "../../bench/harness/result.js";
import { type Measurement, measureRounds, selfContained } from "../../bench/harness/rounds.js";
import { median } from "../../bench/harness/stats.js";

describe("benchmark rounds", () => {
  it("rotates the subjects' order every round and discards warm-up rounds", async () => {
    const order: string[] = [];
    const result = newScenario("s", "S", "ops/s", true);
    const subject = (name: string) =>
      selfContained(name, async (): Promise<Measurement> => {
        order.push(name);
        return { value: 1 };
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
        selfContained("sessionmux", async () => ({ value: 2 * speed[runs.ours++]! })),
        selfContained("raw", async () => ({ value: speed[runs.theirs++]! })),
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
        selfContained("slow", async () => {
          calls.slow++;
          return { value: 400, cpuMs: 250, count: 100 };
        }),
        selfContained("fast", async () => {
          calls.fast++;
          return { value: 1000, cpuMs: 100, count: 100 };
        }),
      ],
      { rounds: 2, warmup: 1, minCpuMs: 1_000 },
    );
    expect(calls).toEqual({ slow: 1 + 2 * 4, fast: 1 + 2 * 4 });
    expect(result.rounds).toEqual({ slow: [400, 400], fast: [1000, 1000] });
  });

  it("repeats within a measured round until the slowest has spent the minimum, also when warm runs get faster", async () => {
    // the warm-up run spends 500 ms (2 runs planned), later ones 250 ms: every measured round needs 4
    let runs = 0;
    const result = newScenario("s", "S", "ops/s", true);
    await measureRounds(
      result,
      [
        selfContained("only", async () => {
          runs++;
          return { value: 1, cpuMs: runs === 1 ? 500 : 250, count: 1 };
        }),
      ],
      { rounds: 2, warmup: 1, minCpuMs: 1_000 },
    );
    expect(runs).toBe(1 + 4 + 4);
  });

  it("starts every round afresh: one slow round does not add runs to the rounds after it", async () => {
    // round 1's runs spend 400 ms (3 runs), round 2's 600 ms (2 runs), not 3 carried over
    let runs = 0;
    const perRun = [400, 400, 400, 600, 600];
    const result = newScenario("s", "S", "ops/s", true);
    await measureRounds(
      result,
      [
        selfContained("only", async () => {
          const cpuMs = perRun[runs++]!;
          return { value: 1, cpuMs, count: 1 };
        }),
      ],
      { rounds: 2, warmup: 0, minCpuMs: 1_000 },
    );
    expect(runs).toBe(3 + 2);
  });

  it("combines the repeated runs of a cost figure as CPU per unit of work (lower is better)", async () => {
    let runs = 0;
    const result = newScenario("s", "S", "ms", false);
    await measureRounds(
      result,
      [
        selfContained("resume", async () => {
          runs++;
          const cpuMs = runs % 2 === 0 ? 300 : 500;
          return { value: cpuMs, cpuMs, count: 1, cost: true };
        }),
      ],
      { rounds: 1, warmup: 0, minCpuMs: 1_000 },
    );
    // 500 + 300 + 500 = 1,300 ms over three resumes
    expect(runs).toBe(3);
    expect(result.rounds).toEqual({ resume: [1300 / 3] });
  });

  it("records a failing subject and keeps measuring the others", async () => {
    const result = newScenario("s", "S", "ops/s", true);
    await measureRounds(
      result,
      [
        selfContained("ok", async () => ({ value: 3 })),
        selfContained("broken", async () => {
          throw new Error("refused");
        }),
      ],
      { rounds: 3, warmup: 0 },
    );
    expect(result.errors).toEqual(["broken: refused"]);
    expect(result.figures.map((f) => f.subject)).toEqual(["ok"]);
    expect(Number.isNaN(ratioAgainst(result, "broken", "ok"))).toBe(true);
  });

  it("sets each subject up once, alternates the repeated runs and closes every subject", async () => {
    const log: string[] = [];
    const subject = (name: string) => ({
      name,
      open: async () => {
        log.push(`open ${name}`);
        return {
          measure: async (): Promise<Measurement> => {
            log.push(name);
            return { value: 1, cpuMs: 500, count: 1 };
          },
          close: async () => {
            log.push(`close ${name}`);
          },
        };
      },
    });
    // 500 ms per run: two runs per round reach 1,000 ms
    await measureRounds(newScenario("s", "S", "ops/s", true), [subject("A"), subject("B")], {
      rounds: 2,
      warmup: 1,
      minCpuMs: 1_000,
    });
    expect(log).toEqual([
      "open A",
      "open B",
      "A",
      "B",
      "B",
      "A",
      "B",
      "A",
      "A",
      "B",
      "A",
      "B",
      "close A",
      "close B",
    ]);
  });

  it("closes the subjects already set up when one fails to set up", async () => {
    const closed: string[] = [];
    const result = newScenario("s", "S", "ops/s", true);
    await measureRounds(
      result,
      [
        {
          name: "up",
          open: async () => ({
            measure: async () => ({ value: 1 }),
            close: async () => {
              closed.push("up");
            },
          }),
        },
        {
          name: "down",
          open: async () => {
            throw new Error("no port");
          },
        },
      ],
      { rounds: 2, warmup: 0 },
    );
    expect(closed).toEqual(["up"]);
    expect(result.errors).toEqual(["down: no port"]);
    expect(result.rounds).toEqual({ up: [1, 1] });
  });

  it("takes the median of odd and even counts", () => {
    expect(median([5, 1, 3])).toBe(3);
    expect(median([4, 1, 3, 2])).toBe(2.5);
    expect(Number.isNaN(median([]))).toBe(true);
  });
});
