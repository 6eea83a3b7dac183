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
   * Throughput subjects whose runs report `cpuMs` run several times per round, as many as the
   * slowest one needs to spend at least this much server CPU, so a round is never decided by
   * timer resolution or one GC pause. Decided from the first round.
   */
  minCpuMs?: number;
  /** Upper bound on repeats of one subject within one round (bounded loops). */
  maxRepeats?: number;
  /** Called before each run, for progress lines. */
  onRun?: (label: string) => void;
}

/** Runs one subject `repeats` times, combining the work done into one figure. */
async function runRepeated(subject: RoundSubject, repeats: number): Promise<Measurement> {
  const first = await subject.run();
  if (repeats <= 1 || first.cpuMs === undefined || first.count === undefined) return first;
  let cpuMs = first.cpuMs;
  let count = first.count;
  for (let i = 1; i < repeats; i++) {
    const more = await subject.run();
    cpuMs += more.cpuMs ?? 0;
    count += more.count ?? 0;
  }
  return {
    value: (count * 1000) / cpuMs,
    detail: `${first.detail ?? ""} ×${repeats} runs, ${cpuMs.toFixed(0)} ms server CPU`,
    cpuMs,
    count,
  };
}

/**
 * Runs per subject in each round so the slowest subject (the most server CPU in the first round)
 * spends at least `minCpuMs`: every subject then does the same work per round.
 */
function repeatsFor(first: readonly Measurement[], minCpuMs: number, maxRepeats: number): number {
  const slowest = Math.max(0, ...first.map((m) => m.cpuMs ?? 0));
  if (!(slowest > 0) || minCpuMs <= 0) return 1;
  return Math.min(maxRepeats, Math.max(1, Math.ceil(minCpuMs / slowest)));
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
  let repeats = 1;
  for (let round = 0; round < total; round++) {
    const measured: Measurement[] = [];
    const order = subjects.map((_, i) => subjects[(i + round) % subjects.length]!);
    for (const subject of order) {
      if (failed.has(subject.name)) continue;
      const label =
        round < options.warmup ? "warm-up" : `round ${round - options.warmup + 1}/${options.rounds}`;
      options.onRun?.(`${result.title}: ${subject.name} (${label})`);
      try {
        const m = await runRepeated(subject, repeats);
        measured.push(m);
        if (round < options.warmup) continue;
        rounds[subject.name]!.push(m.value);
        if (m.detail) details.set(subject.name, m.detail);
      } catch (error) {
        failed.add(subject.name);
        result.errors.push(`${subject.name}: ${error instanceof Error ? error.message : String(error)}`);
      }
    }
    if (round === 0) repeats = repeatsFor(measured, options.minCpuMs ?? 0, options.maxRepeats ?? 8);
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
