import { readFileSync } from "node:fs";
import { afterEach, describe, expect, it } from "vitest";
import { ratioAgreement } from "../../bench/harness/agreement.js";
import { type BenchReport, renderMarkdown, writeReport } from "../../bench/harness/report.js";
import { newScenario } from "../../bench/harness/result.js";
import { tempFolder } from "../../bench/harness/temp-folder.js";

const folders: { remove(): void }[] = [];
afterEach(() => {
  for (const folder of folders.splice(0)) folder.remove();
});

describe("benchmark result files", () => {
  it("keeps every run of a day under its own name, as JSON that a comparison reads back", () => {
    const folder = tempFolder("report-test");
    folders.push(folder);
    const scenario = newScenario("fanout", "Fanout", "deliveries/s", true);
    scenario.rounds = { sessionmux: [10, 11], "raw ws": [10, 10] };
    scenario.figures = [
      { subject: "sessionmux", value: 10.5 },
      { subject: "raw ws", value: 10 },
    ];
    scenario.durationMs = 42_000;
    const report: BenchReport = {
      date: "2026-12-01",
      machine: { cpuModel: "x", cores: 2, memoryBytes: 1, node: "v20", platform: "linux" },
      durationMs: 60_000,
      scenarios: [scenario],
    };
    const morning = writeReport(report, folder.path, "2026-12-01T0900");
    const noon = writeReport(report, folder.path, "2026-12-01T1200");
    expect(morning.json).not.toBe(noon.json);
    expect(readFileSync(noon.md, "utf8")).toContain("- Fanout: 42 s");
    const back = [morning.json, noon.json].map((f) => JSON.parse(readFileSync(f, "utf8")) as BenchReport);
    expect(ratioAgreement(back)[0]).toMatchObject({ ratios: [1.05, 1.05], maxDeviation: 0 });
  });

  it("names the scenarios that ran with pinned CPUs, and only those", () => {
    const pinned = newScenario("fanout", "Fanout", "deliveries/s", true);
    pinned.pinned = true;
    const free = newScenario("append", "Append", "events/s", true);
    const report: BenchReport = {
      date: "2026-12-01",
      machine: { cpuModel: "x", cores: 2, memoryBytes: 1, node: "v20", platform: "linux" },
      durationMs: 60_000,
      scenarios: [pinned, free],
    };
    const line = renderMarkdown(report)
      .split("\n")
      .find((l) => l.startsWith("CPU pinning"));
    expect(line).toMatch(/in: Fanout\.$/);
    expect(renderMarkdown({ ...report, scenarios: [free] })).not.toContain("CPU pinning");
  });
});
