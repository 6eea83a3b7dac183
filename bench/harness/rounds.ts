import type { Figure, ScenarioResult } from "./result.js";
import { median } from "./stats.js";

/** One subject's measurement: the figure, and optionally the work behind it (for repeat-until). */
export interface Measurement {
  value: number;
  detail?: string;
  /** Server CPU the measurement spent, in ms; with `count`, lets a short round be repeated. */
  cpuMs?: number;
  /** Units of work done (deliveries, events), so repeated runs combine as count / cpuMs. */
  count?: number;
}

export interface RoundSubject {
  name: string;
  run: () => Promise<Measurement>;
}

export interface RoundsOptions {
  /** Measured rounds (after warm-up). */
  rounds: number;
  /** Rounds run first and discarded (JIT, page cache, sockets' first use). */
  warmup: number;
  /**
   * A throughput round whose runs report `cpuMs` is repeated until the slowest subject spent at
   * least this much server CPU, so a round is never decided by timer resolution or one GC pause.
   */
  minCpuMs?: number;
  /** Upper bound on repeats of one subject within one round (bounded loops). */
  maxRepeats?: number;
  /** Called before each run, for progress lines. */
  onRun?: (label: string) => void;
}

/** Runs one subject until its CPU reaches `minCpuMs` (or `maxRepeats`), combining the work done. */
async function runLongEnough(
  subject: RoundSubject,
  minCpuMs: number,
  maxRepeats: number,
): Promise<Measurement> {
  const first = await subject.run();
  if (first.cpuMs === undefined || first.count === undefined || first.cpuMs >= minCpuMs) return first;
  let cpuMs = first.cpuMs;
  let count = first.count;
  let repeats = 1;
  while (cpuMs < minCpuMs && repeats < maxRepeats) {
    const more = await subject.run();
    if (more.cpuMs === undefined || more.count === undefined) break;
    cpuMs += more.cpuMs;
    count += more.count;
    repeats++;
  }
  return {
    value: (count * 1000) / cpuMs,
    detail: `${first.detail ?? ""} ×${repeats} runs, ${cpuMs.toFixed(0)} ms server CPU`,
    cpuMs,
    count,
  };
}

/**
 * Measures every subject `warmup + rounds` times, rotating the order each round (A B C, B C A,
 * C A B, …) so no subject always runs first on a cold machine or last on a hot one. The figures
 * are per-subject medians; the per-round values stay in `result.rounds`, so each ratio is the
 * median of the ratios of the same round. A failing subject is recorded and skipped from then on.
 */
export async function measureRounds(
  result: ScenarioResult,
  subjects: readonly RoundSubject[],
  options: RoundsOptions,
): Promise<void> {
  const rounds: Record<string, number[]> = Object.fromEntries(subjects.map((s) => [s.name, []]));
  const details = new Map<string, string>();
  const failed = new Set<string>();
  const total = options.warmup + options.rounds;
  for (let round = 0; round < total; round++) {
    const order = subjects.map((_, i) => subjects[(i + round) % subjects.length]!);
    for (const subject of order) {
      if (failed.has(subject.name)) continue;
      const label =
        round < options.warmup ? "warm-up" : `round ${round - options.warmup + 1}/${options.rounds}`;
      options.onRun?.(`${result.title}: ${subject.name} (${label})`);
      try {
        const m = await runLongEnough(subject, options.minCpuMs ?? 0, options.maxRepeats ?? 8);
        if (round < options.warmup) continue;
        rounds[subject.name]!.push(m.value);
        if (m.detail) details.set(subject.name, m.detail);
      } catch (error) {
        failed.add(subject.name);
        result.errors.push(`${subject.name}: ${error instanceof Error ? error.message : String(error)}`);
      }
    }
  }
  result.rounds = {};
  for (const subject of subjects) {
    const values = rounds[subject.name]!;
    if (failed.has(subject.name) || values.length === 0) continue;
    result.rounds[subject.name] = values;
    const figure: Figure = { subject: subject.name, value: median(values) };
    const detail = details.get(subject.name);
    figure.detail = `${detail ? `${detail}; ` : ""}median of ${values.length} rounds, ${spread(values)}`;
    result.figures.push(figure);
  }
}

/** Min–max as a percentage around the median, e.g. "−4%…+6%". */
function spread(values: readonly number[]): string {
  const m = median(values);
  const pct = (v: number) => `${v >= m ? "+" : "−"}${Math.abs(((v - m) / m) * 100).toFixed(0)}%`;
  return `spread ${pct(Math.min(...values))}…${pct(Math.max(...values))}`;
}
