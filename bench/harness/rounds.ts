import { collectGarbage, collectYoungGarbage } from "./gc.js";
import type { Figure, ScenarioResult } from "./result.js";
import { median } from "./stats.js";

/**
 * How a scenario runs: its rounds, and `pinned` for those measured in server CPU or latency
 * against a follower process, which then gets a CPU of its own (see `pinServers`).
 */
export type ScenarioOptions = Partial<RoundsOptions> & { pinned?: boolean };

/** One subject's measurement: the figure, and optionally the work behind it (for repeat-until). */
export interface Measurement {
  value: number;
  detail?: string;
  /**
   * Time the measured work took, in ms: server CPU, or wall time for a wall-timed figure. With
   * `count`, lets a short round be repeated and its runs combined.
   */
  cpuMs?: number;
  /** Units of work done (deliveries, events), so repeated runs combine as count / cpuMs. */
  count?: number;
  /** The figure is CPU per unit of work (lower is better): repeated runs combine as cpuMs / count. */
  cost?: boolean;
}

/** A subject set up once per scenario: measured as often as the rounds need, then closed. */
export interface OpenSubject {
  measure(): Promise<Measurement>;
  close(): Promise<void>;
}

export interface RoundSubject {
  name: string;
  /** Sets the subject up (server, followers, data) once, outside any measured window. */
  open(): Promise<OpenSubject>;
}

/** A subject whose every run sets itself up and tears itself down (store-level, one-shot runs). */
export function selfContained(name: string, run: () => Promise<Measurement>): RoundSubject {
  return { name, open: async () => ({ measure: run, close: async () => {} }) };
}

export interface RoundsOptions {
  /** Measured rounds (after warm-up). */
  rounds: number;
  /** Rounds run first and discarded (JIT, page cache, sockets' first use). */
  warmup: number;
  /**
   * Throughput subjects whose runs report `cpuMs` run several times per measured round, all as
   * often as the slowest one needs to spend at least this much, so a round is never decided by
   * timer resolution or one GC pause: a round adds runs of every subject until the slowest has
   * spent it (at most `maxRepeats`). Rounds need not match in runs: a ratio compares subjects
   * within one round, where every subject ran equally often.
   */
  minCpuMs?: number;
  /** Upper bound on repeats of one subject within one round (bounded loops). */
  maxRepeats?: number;
  /** Called before each run, for progress lines. */
  onRun?: (label: string) => void;
}

/** The runs of one subject in one round as one figure: work done over CPU spent. */
function combine(runs: readonly Measurement[]): Measurement {
  const first = runs[0]!;
  if (runs.length === 1 || first.cpuMs === undefined || first.count === undefined) return first;
  const cpuMs = runs.reduce((sum, m) => sum + (m.cpuMs ?? 0), 0);
  const count = runs.reduce((sum, m) => sum + (m.count ?? 0), 0);
  return {
    value: first.cost ? cpuMs / count : (count * 1000) / cpuMs,
    ...(first.cost ? { cost: true } : {}),
    detail: `${first.detail ?? ""} ×${runs.length} runs, ${cpuMs.toFixed(0)} ms measured`,
    cpuMs,
    count,
  };
}

/**
 * The CPU of the subject that spent the most in this round so far; Infinity when no subject
 * reports CPU (nothing to repeat for).
 */
function slowestCpuMs(runs: ReadonlyMap<RoundSubject, readonly Measurement[]>): number {
  let slowest = Number.POSITIVE_INFINITY;
  let reported = false;
  for (const done of runs.values()) {
    if (done.some((m) => m.cpuMs === undefined)) continue;
    const spent = done.reduce((sum, m) => sum + m.cpuMs!, 0);
    slowest = reported ? Math.max(slowest, spent) : spent;
    reported = true;
  }
  return slowest;
}

const message = (error: unknown) => (error instanceof Error ? error.message : String(error));

/**
 * Measures every subject `warmup + rounds` times, rotating the order each round (A B C, B C A,
 * C A B, …) so no subject always runs first on a cold machine or last on a hot one. Every subject
 * is set up once for all rounds, and a round's repeated runs alternate (A B C A B C …), so a burst
 * of load on the machine falls on all subjects; each round starts after a full GC and each run after
 * a young-generation one. The
 * figures are per-subject medians; the per-round values stay in `result.rounds`, so each ratio is
 * the median of the ratios of the same round. A failing subject is recorded and skipped from then on.
 */
export async function measureRounds(
  result: ScenarioResult,
  subjects: readonly RoundSubject[],
  options: RoundsOptions,
): Promise<void> {
  const rounds: Record<string, number[]> = Object.fromEntries(subjects.map((s) => [s.name, []]));
  const details = new Map<string, string>();
  const failed = new Set<string>();
  const fail = (subject: RoundSubject, error: unknown) => {
    if (failed.has(subject.name)) return;
    failed.add(subject.name);
    result.errors.push(`${subject.name}: ${message(error)}`);
  };
  const total = options.warmup + options.rounds;
  const opened = new Map<RoundSubject, OpenSubject>();
  const minCpuMs = options.minCpuMs ?? 0;
  const maxRepeats = options.maxRepeats ?? 8;
  try {
    for (let round = 0; round < total; round++) {
      const order = subjects.map((_, i) => subjects[(i + round) % subjects.length]!);
      const label =
        round < options.warmup ? "warm-up" : `round ${round - options.warmup + 1}/${options.rounds}`;
      const runs = new Map<RoundSubject, Measurement[]>();
      // Set-ups run side by side (each starts processes and waits on them); nothing is measured yet.
      await Promise.all(
        order
          .filter((subject) => !failed.has(subject.name) && !opened.has(subject))
          .map((subject) =>
            subject.open().then(
              (open) => void opened.set(subject, open),
              (error: unknown) => fail(subject, error),
            ),
          ),
      );
      const warmup = round < options.warmup;
      collectGarbage();
      for (let repeat = 0; repeat < maxRepeats; repeat++) {
        if (repeat > 0 && (warmup || slowestCpuMs(runs) >= minCpuMs)) break;
        for (const subject of order) {
          const open = opened.get(subject);
          if (!open || failed.has(subject.name)) continue;
          const run = repeat > 0 ? `, run ${repeat + 1}` : "";
          options.onRun?.(`${result.title}: ${subject.name} (${label}${run})`);
          try {
            collectYoungGarbage();
            const runStarted = performance.now();
            const measured = await open.measure();
            result.runMs = (result.runMs ?? 0) + performance.now() - runStarted;
            runs.set(subject, [...(runs.get(subject) ?? []), measured]);
          } catch (error) {
            fail(subject, error);
          }
        }
      }
      for (const [subject, done] of runs) {
        if (failed.has(subject.name) || warmup) continue;
        const m = combine(done);
        rounds[subject.name]!.push(m.value);
        if (m.detail) details.set(subject.name, m.detail);
      }
    }
  } finally {
    // side by side, as they were set up: each stops its own servers and processes
    await Promise.all(
      [...opened].map(([subject, open]) => open.close().catch((error: unknown) => fail(subject, error))),
    );
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
