import { describe, expect, it } from "vitest";
import {
  renderReadmeTable,
  replaceReadmeTable,
  TABLE_END,
  TABLE_START,
} from "../../bench/harness/readme-table.js";
import type { BenchReport } from "../../bench/harness/report.js";
import { newScenario } from "../../bench/harness/result.js";

function report(): BenchReport {
  const fanout = newScenario("fanout", "Fanout", "deliveries/s", true, [{ against: "raw ws", min: 0.8 }]);
  fanout.rounds = { sessionmux: [9, 10, 12], "raw ws": [10, 10, 10] };
  fanout.figures = [
    { subject: "sessionmux", value: 10 },
    { subject: "raw ws", value: 10 },
    { subject: "Socket.IO 4", value: 20 },
  ];
  fanout.rounds["Socket.IO 4"] = [20, 20, 20];
  return {
    date: "2026-12-01",
    machine: { cpuModel: "EPYC", cores: 2, memoryBytes: 2 ** 31, node: "v20", platform: "linux" },
    durationMs: 240_000,
    load: { before: 0.5, after: 1.25 },
    method: { rounds: 3, warmup: 1, minCpuMs: 1_000, quick: false },
    scenarios: [fanout],
  };
}

describe("README performance table", () => {
  it("shows every subject's median ratio with its spread and the goal, from the run alone", () => {
    const table = renderReadmeTable(report(), "bench/results/run.md");
    expect(table).toContain(
      "`bench/results/run.md`: EPYC, 2 cores, 2.0 GiB, Node v20, linux, load average 0.50 before and 1.25 after, 240 s",
    );
    expect(table).toContain(
      "| Fanout | 10.00 deliveries/s | raw ws (10.00) | 1.00× (0.90–1.20, 3) | ≥ 0.8× ✔ |",
    );
    expect(table).toContain("|  |  | Socket.IO 4 (20.00) | 0.50× (0.45–0.60, 3) |  |");
  });

  it("says of a tail percentile's ratio that it compares figures of pooled rounds", () => {
    const run = report();
    const p99 = newScenario("latency-p99", "Latency p99", "ms", false);
    p99.figures = [
      { subject: "sessionmux", value: 4 },
      { subject: "raw ws", value: 2 },
    ];
    p99.pooledRounds = 7;
    run.scenarios.push(p99);
    expect(renderReadmeTable(run, "run.md")).toContain(
      "| Latency p99 | 4.00 ms | raw ws (2.00) | 0.50× (7 rounds pooled) |  |",
    );
  });

  it("replaces only the block between the markers, and refuses a README without them", () => {
    const readme = `# x\n${TABLE_START}\nold\n${TABLE_END}\nafter\n`;
    expect(replaceReadmeTable(readme, "new")).toBe(`# x\n${TABLE_START}\nnew\n${TABLE_END}\nafter\n`);
    expect(() => replaceReadmeTable("# x\n", "new")).toThrow(/table-start|bench-table/);
  });
});
