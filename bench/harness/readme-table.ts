import { formatMachine } from "./machine.js";
import { type BenchReport, formatFigure, ratioText } from "./report.js";
import { ratioAgainst, SESSIONMUX } from "./result.js";

export const TABLE_START = "<!-- bench-table:start -->";
export const TABLE_END = "<!-- bench-table:end -->";

/**
 * The README's performance table from one full run: per scenario sessionmux's median and, per
 * subject, the median ratio with its min–max and the goal. Every figure in it comes from `report`.
 */
export function renderReadmeTable(report: BenchReport, resultFile: string): string {
  const method = report.method;
  const load = report.load
    ? `, load average ${report.load.before.toFixed(2)} before and ${report.load.after.toFixed(2)} after`
    : "";
  const out = [
    `The last full run (\`${resultFile}\`: ${formatMachine(report.machine)}${load}, ` +
      `${(report.durationMs / 1000).toFixed(0)} s in all)` +
      (method
        ? `, ${method.rounds} rounds after ${method.warmup} warm-up unless the scenario says otherwise`
        : "") +
      "; a ratio > 1× means sessionmux is better:",
    "",
    "| scenario | sessionmux (median) | against | ratio: median (min–max, rounds) | goal |",
    "|---|---:|---|---:|---:|",
  ];
  for (const scenario of report.scenarios) {
    const ours = scenario.figures.find((f) => f.subject === SESSIONMUX);
    const others = scenario.figures.filter((f) => f.subject !== SESSIONMUX);
    others.forEach((figure, i) => {
      const ratio = ratioAgainst(scenario, figure.subject);
      const goal = scenario.goals.find((g) => g.against === figure.subject);
      const goalText = goal ? `≥ ${goal.min}× ${ratio >= goal.min ? "✔" : "✘"}` : "";
      const head =
        i === 0 ? [scenario.title, ours ? `${formatFigure(ours.value)} ${scenario.unit}` : "–"] : ["", ""];
      out.push(
        `| ${[...head, `${figure.subject} (${formatFigure(figure.value)})`, ratioText(scenario, figure.subject, ""), goalText].join(" | ")} |`,
      );
    });
    for (const error of scenario.errors)
      out.push(`| ${scenario.title} | (failed) | ${error.replaceAll("|", "/")} | | |`);
  }
  return out.join("\n");
}

/** `readme` with the text between the table markers replaced by `table`. */
export function replaceReadmeTable(readme: string, table: string): string {
  const start = readme.indexOf(TABLE_START);
  const end = readme.indexOf(TABLE_END);
  if (start < 0 || end < start) throw new Error(`README has no ${TABLE_START} … ${TABLE_END} block`);
  return `${readme.slice(0, start + TABLE_START.length)}\n${table}\n${readme.slice(end)}`;
}
