import type { BenchReport } from "./report.js";
import { ratioAgainst, SESSIONMUX } from "./result.js";

/** One ratio (sessionmux against a subject in a scenario) as each compared run measured it. */
export interface RatioAgreement {
  scenario: string;
  subject: string;
  /** The run's median ratio, NaN where that run did not measure it. */
  ratios: number[];
  mean: number;
  /** Largest distance of a run's ratio from the mean, as a fraction of the mean (0.05 = ±5%). */
  maxDeviation: number;
}

/**
 * Every ratio the runs measured, in the first run's order, with how far the runs are apart: the
 * check that consecutive full runs "agree within ±10%" on each ratio.
 */
export function ratioAgreement(runs: readonly BenchReport[]): RatioAgreement[] {
  const keys: { id: string; title: string; subject: string }[] = [];
  const seen = new Set<string>();
  for (const run of runs)
    for (const scenario of run.scenarios)
      for (const figure of scenario.figures) {
        const key = `${scenario.id}\u0000${figure.subject}`;
        if (figure.subject === SESSIONMUX || figure.uncompared || seen.has(key)) continue;
        seen.add(key);
        keys.push({ id: scenario.id, title: scenario.title, subject: figure.subject });
      }
  return keys.map(({ id, title, subject }) => {
    const ratios = runs.map((run) => {
      const scenario = run.scenarios.find((s) => s.id === id);
      return scenario ? ratioAgainst(scenario, subject) : Number.NaN;
    });
    const measured = ratios.filter((r) => Number.isFinite(r));
    const mean = measured.reduce((sum, r) => sum + r, 0) / measured.length;
    const maxDeviation =
      measured.length < runs.length
        ? Number.NaN
        : Math.max(...measured.map((r) => Math.abs(r - mean) / mean));
    return { scenario: title, subject, ratios, mean, maxDeviation };
  });
}

/** The markdown table of `ratioAgreement`, each ratio marked against the `tolerance` (0.1 = ±10%). */
export function renderAgreement(
  names: readonly string[],
  rows: readonly RatioAgreement[],
  tolerance = 0.1,
): string {
  const fixed = (r: number) => (Number.isFinite(r) ? `${r.toFixed(2)}×` : "–");
  const out = [
    `| scenario | against | ${names.join(" | ")} | mean | max deviation | within ±${(tolerance * 100).toFixed(0)}% |`,
    `|---|---|${names.map(() => "---:|").join("")}---:|---:|---|`,
  ];
  for (const row of rows) {
    const deviation = Number.isFinite(row.maxDeviation) ? `±${(row.maxDeviation * 100).toFixed(1)}%` : "–";
    const verdict = !Number.isFinite(row.maxDeviation)
      ? "not in every run"
      : row.maxDeviation <= tolerance
        ? "yes"
        : "**no**";
    out.push(
      `| ${row.scenario} | ${row.subject} | ${row.ratios.map(fixed).join(" | ")} | ${fixed(row.mean)} | ${deviation} | ${verdict} |`,
    );
  }
  const agreeing = rows.filter((r) => r.maxDeviation <= tolerance).length;
  out.push(
    "",
    `${agreeing} of ${rows.length} ratios within ±${(tolerance * 100).toFixed(0)}% across ${names.length} runs.`,
  );
  return `${out.join("\n")}\n`;
}
