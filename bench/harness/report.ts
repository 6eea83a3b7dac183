import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { formatMachine, type MachineDescription } from "./machine.js";
import { ratioAgainst, type ScenarioResult, SESSIONMUX } from "./result.js";

export interface BenchReport {
  date: string;
  machine: MachineDescription;
  durationMs: number;
  scenarios: ScenarioResult[];
}

const number = (value: number): string =>
  !Number.isFinite(value)
    ? "–"
    : value >= 100
      ? Math.round(value).toLocaleString("en-US")
      : value >= 1
        ? value.toFixed(2)
        : value.toPrecision(2);

/** The goal lines: met / missed with the figure. */
export function goalLines(report: BenchReport): string[] {
  const lines: string[] = [];
  for (const scenario of report.scenarios) {
    for (const goal of scenario.goals) {
      const ratio = ratioAgainst(scenario, goal.against);
      const verdict = Number.isNaN(ratio) ? "not measured" : ratio >= goal.min ? "met" : "missed";
      lines.push(`- ${scenario.title}: ≥ ${goal.min}× ${goal.against} — **${verdict}** (${number(ratio)}×)`);
    }
  }
  return lines;
}

/** The markdown table the README's Performance section shows. */
export function renderMarkdown(report: BenchReport): string {
  const out = [
    `# sessionmux benchmark, ${report.date}`,
    "",
    `Machine: ${formatMachine(report.machine)}. Total run ${(report.durationMs / 1000).toFixed(0)} s.`,
    "Every ratio compares sessionmux with a subject measured in the same run (> 1× = sessionmux better).",
    "",
    "| scenario | subject | figure | unit | sessionmux is | detail |",
    "|---|---|---:|---|---:|---|",
  ];
  for (const scenario of report.scenarios) {
    const better = scenario.higherIsBetter ? "higher is better" : "lower is better";
    for (const figure of scenario.figures) {
      const ratio = figure.subject === SESSIONMUX ? "" : `${number(ratioAgainst(scenario, figure.subject))}×`;
      out.push(
        `| ${scenario.title} | ${figure.subject} | ${number(figure.value)} | ${scenario.unit} (${better}) | ${ratio} | ${figure.detail ?? ""} |`,
      );
    }
    for (const error of scenario.errors)
      out.push(`| ${scenario.title} | (failed) | – | | | ${error.replaceAll("|", "/")} |`);
  }
  out.push("", "## Goals", "", ...goalLines(report));
  const notes = report.scenarios.flatMap((s) => s.notes.map((n) => `- ${s.title}: ${n}`));
  if (notes.length > 0) out.push("", "## Notes", "", ...notes);
  return `${out.join("\n")}\n`;
}

/** Writes `bench/results/<date>.json` and `.md`; returns the markdown. */
export function writeReport(
  report: BenchReport,
  folder: string,
): { json: string; md: string; markdown: string } {
  mkdirSync(folder, { recursive: true });
  const json = join(folder, `${report.date}.json`);
  const md = join(folder, `${report.date}.md`);
  const markdown = renderMarkdown(report);
  writeFileSync(json, `${JSON.stringify(report, null, 2)}\n`);
  writeFileSync(md, markdown);
  return { json, md, markdown };
}
