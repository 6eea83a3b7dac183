import { describe, expect, it } from "vitest";
import { ratioAgreement, renderAgreement } from "../../bench/harness/agreement.js";
import { type BenchReport, ratioText } from "../../bench/harness/report.js";
import { newScenario, ratioAgainst } from "../../bench/harness/result.js";

/** A full run whose only scenario measured sessionmux at `ours` and raw ws at `theirs`, per round. */
function run(ours: number[], theirs: number[], extra = false): BenchReport {
  const fanout = newScenario("fanout", "Fanout", "deliveries/s", true);
  fanout.rounds = { sessionmux: ours, "raw ws": theirs };
  fanout.figures = [
    { subject: "sessionmux", value: ours[0]! },
    { subject: "raw ws", value: theirs[0]! },
  ];
  const scenarios = [fanout];
  if (extra) {
    const latency = newScenario("latency", "Latency", "ms", false);
    latency.rounds = { sessionmux: [2], "raw ws": [1] };
    latency.figures = [
      { subject: "sessionmux", value: 2 },
      { subject: "raw ws", value: 1 },
    ];
    scenarios.push(latency);
  }
  return {
    date: "2026-12-01",
    machine: { cpuModel: "x", cores: 2, memoryBytes: 1, node: "v20", platform: "linux" },
    durationMs: 1,
    scenarios,
  };
}

describe("agreement of benchmark runs", () => {
  it("gives each run's median ratio and the largest deviation from their mean", () => {
    // per-round ratios: run 1 → 0.9, 1.0, 1.1 (median 1.0); run 2 → 1.2; run 3 → 0.8
    const rows = ratioAgreement([run([9, 10, 11], [10, 10, 10]), run([12], [10]), run([8], [10])]);
    expect(rows).toHaveLength(1);
    const [row] = rows;
    expect(row!.subject).toBe("raw ws");
    expect(row!.ratios).toEqual([1, 1.2, 0.8]);
    expect(row!.mean).toBeCloseTo(1);
    expect(row!.maxDeviation).toBeCloseTo(0.2);
    const table = renderAgreement(["a", "b", "c"], rows);
    expect(table).toContain("| Fanout | raw ws | 1.00× | 1.20× | 0.80× | 1.00× | ±20.0% | **no** |");
    expect(table).toContain("0 of 1 ratios within ±10% across 3 runs.");
  });

  it("marks runs that agree, and a ratio one run did not measure", () => {
    const rows = ratioAgreement([run([10], [10], true), run([10.5], [10])]);
    expect(rows.map((r) => r.scenario)).toEqual(["Fanout", "Latency"]);
    expect(rows[0]!.maxDeviation).toBeCloseTo(0.025 / 1.025);
    // lower-is-better: 1 ms against 2 ms is 0.5×
    expect(rows[1]!.ratios[0]).toBe(0.5);
    expect(Number.isNaN(rows[1]!.ratios[1])).toBe(true);
    const table = renderAgreement(["a", "b"], rows);
    expect(table).toContain("| yes |");
    expect(table).toContain("| not in every run |");
    expect(table).toContain("1 of 2 ratios within ±10% across 2 runs.");
  });

  it("leaves a figure shown for reference out of the ratios, and says why in the report", () => {
    const reference = (r: BenchReport) => {
      const p99 = newScenario("p99", "Latency p99", "ms", false);
      p99.pooledRounds = 7;
      p99.figures = [
        { subject: "sessionmux", value: 4 },
        { subject: "raw ws", value: 2, uncompared: "its p99 is the machine's stalls" },
        { subject: "durable", value: 5 },
      ];
      r.scenarios.push(p99);
      return r;
    };
    const runs = [reference(run([10], [10])), reference(run([10], [10]))];
    const rows = ratioAgreement(runs);
    expect(rows.map((r) => `${r.scenario}/${r.subject}`)).toEqual(["Fanout/raw ws", "Latency p99/durable"]);
    const p99 = runs[0]!.scenarios[1]!;
    expect(Number.isNaN(ratioAgainst(p99, "raw ws"))).toBe(true);
    expect(ratioAgainst(p99, "durable")).toBe(1.25);
    expect(ratioText(p99, "raw ws")).toBe("not compared: its p99 is the machine's stalls");
    expect(ratioText(p99, "durable")).toBe("1.25× (7 rounds pooled)");
  });
});
