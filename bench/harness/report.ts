import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { formatMachine, type MachineDescription } from "./machine.js";
import { ratioAgainst, roundRatios, type ScenarioResult, SESSIONMUX } from "./result.js";

export interface BenchReport {
  date: string;
  machine: MachineDescription;
  durationMs: number;
  /** The 1-minute load average before the first scenario and after the last. */
  load?: { before: number; after: number };
  /** Measured rounds per scenario (after warm-up), and whether this was a `--quick` run. */
  method?: { rounds: number; warmup: number; minCpuMs: number; quick: boolean };
  scenarios: ScenarioResult[];
}

/** A figure as the reports print it: grouped integers from 100, two decimals from 1, else two digits. */
export const formatFigure = (value: number): string =>
  !Number.isFinite(value)
    ? "–"
    : value >= 100
      ? Math.round(value).toLocaleString("en-US")
      : value >= 1
        ? value.toFixed(2)
        : value.toPrecision(2);

/**
 * "0.82× (0.78–0.90, 7 rounds)" from the per-round ratios (`rounds`: the word after the count),
 * "0.60× (7 rounds pooled)" for figures taken over pooled rounds, or the plain ratio.
 */
export function ratioText(scenario: ScenarioResult, subject: string, rounds = " rounds"): string {
  const uncompared = scenario.figures.find((f) => f.subject === subject)?.uncompared;
  if (uncompared) return `not compared: ${uncompared}`;
  const stats = roundRatios(scenario, subject);
  const ratio = `${formatFigure(stats ? stats.median : ratioAgainst(scenario, subject))}×`;
  if (stats)
    return `${ratio} (${formatFigure(stats.min)}–${formatFigure(stats.max)}, ${stats.rounds}${rounds})`;
  return scenario.pooledRounds ? `${ratio} (${scenario.pooledRounds} rounds pooled)` : ratio;
}

/** The goal lines: met / missed with the figure. */
export function goalLines(report: BenchReport): string[] {
  const lines: string[] = [];
  for (const scenario of report.scenarios) {
    for (const goal of scenario.goals) {
      const ratio = ratioAgainst(scenario, goal.against);
      const verdict = Number.isNaN(ratio) ? "not measured" : ratio >= goal.min ? "met" : "missed";
      lines.push(
        `- ${scenario.title}: ≥ ${goal.min}× ${goal.against} — **${verdict}** (${ratioText(scenario, goal.against)})`,
      );
    }
  }
  return lines;
}

function methodLines(report: BenchReport): string[] {
  const lines: string[] = [];
  if (report.load)
    lines.push(
      `Load average (1 min): ${report.load.before.toFixed(2)} before, ${report.load.after.toFixed(2)} after.`,
    );
  if (report.method) {
    const m = report.method;
    lines.push(
      `Method: ${m.rounds} measured rounds per scenario after ${m.warmup} warm-up, subjects alternating ` +
        `(A B C, B C A, …); a throughput round repeats each subject as often as the slowest needs for ≥ ${m.minCpuMs} ms of server CPU` +
        `${m.quick ? "; **--quick run: not for claims**" : ""}.`,
    );
  }
  const pinned = report.scenarios.filter((s) => s.pinned).map((s) => s.title);
  if (pinned.length > 0)
    lines.push(
      `CPU pinning (\`taskset\`): the bench process (every server) on CPU 0, the follower process on the last CPU, in: ${pinned.join("; ")}.`,
    );
  return lines;
}

/** " (29 s in runs)": how much of a scenario's time its subjects' runs took, the rest being set-up. */
function inRuns(scenario: ScenarioResult): string {
  return scenario.runMs === undefined ? "" : ` (${(scenario.runMs / 1000).toFixed(0)} s in runs)`;
}

/** ", 48 MiB held after": what the process kept once the scenario's subjects were closed. */
function heldAfter(scenario: ScenarioResult): string {
  const held = scenario.heldAfterBytes;
  return held === undefined ? "" : `, ${(held / 2 ** 20).toFixed(0)} MiB held after`;
}

/** The markdown table the README's Performance section shows. */
export function renderMarkdown(report: BenchReport): string {
  const out = [
    `# sessionmux benchmark, ${report.date}`,
    "",
    `Machine: ${formatMachine(report.machine)}. Total run ${(report.durationMs / 1000).toFixed(0)} s.`,
    ...methodLines(report),
    "Every ratio compares sessionmux with a subject measured in the same run (> 1× = sessionmux better):",
    "the median of the per-round ratios, with their min–max.",
    "",
    "| scenario | subject | figure | unit | sessionmux is | detail |",
    "|---|---|---:|---|---:|---|",
  ];
  for (const scenario of report.scenarios) {
    const better = scenario.higherIsBetter ? "higher is better" : "lower is better";
    for (const figure of scenario.figures) {
      const ratio = figure.subject === SESSIONMUX ? "" : ratioText(scenario, figure.subject);
      out.push(
        `| ${scenario.title} | ${figure.subject} | ${formatFigure(figure.value)} | ${scenario.unit} (${better}) | ${ratio} | ${figure.detail ?? ""} |`,
      );
    }
    for (const error of scenario.errors)
      out.push(`| ${scenario.title} | (failed) | – | | | ${error.replaceAll("|", "/")} |`);
  }
  out.push("", "## Goals", "", ...goalLines(report));
  const timed = report.scenarios.filter((s) => s.durationMs !== undefined);
  if (timed.length > 0)
    out.push(
      "",
      "## Time per scenario",
      "",
      ...timed.map((s) => `- ${s.title}: ${(s.durationMs! / 1000).toFixed(0)} s${inRuns(s)}${heldAfter(s)}`),
    );
  const notes = report.scenarios.flatMap((s) => s.notes.map((n) => `- ${s.title}: ${n}`));
  if (notes.length > 0) out.push("", "## Notes", "", ...notes);
  return `${out.join("\n")}\n`;
}

/**
 * Writes `<folder>/<stem>.json` and `.md` (stem e.g. `2026-12-01T1030`, so consecutive runs of one
 * day are all kept for `npm run bench:compare`); returns the markdown.
 */
export function writeReport(
  report: BenchReport,
  folder: string,
  stem: string,
): { json: string; md: string; markdown: string } {
  mkdirSync(folder, { recursive: true });
  const json = join(folder, `${stem}.json`);
  const md = join(folder, `${stem}.md`);
  const markdown = renderMarkdown(report);
  writeFileSync(json, `${JSON.stringify(report, null, 2)}\n`);
  writeFileSync(md, markdown);
  return { json, md, markdown };
}
