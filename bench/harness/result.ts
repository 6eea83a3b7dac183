import { median } from "./stats.js";

/** One measured figure of one subject (sessionmux, a baseline or a peer) in one scenario. */
export interface Figure {
  subject: string;
  value: number;
  /** What was done, e.g. "20,000 events × 100 followers". */
  detail?: string;
  /** Shown for reference, with no ratio: why its ratio to sessionmux would tell nothing. */
  uncompared?: string;
}

/** A ratio goal: sessionmux must be at least `min` times as good as `against`. */
export interface Goal {
  against: string;
  min: number;
}

export interface ScenarioResult {
  id: string;
  title: string;
  unit: string;
  /** Throughput: higher is better; time, latency, memory: lower is better. */
  higherIsBetter: boolean;
  figures: Figure[];
  goals: Goal[];
  notes: string[];
  /** Set when a subject could not run; the scenario still reports what did. */
  errors: string[];
  /** Per-subject values of each measured round, in round order (see measureRounds). */
  rounds?: Record<string, number[]>;
  /** Instead: each figure was taken over the samples of this many measured rounds pooled. */
  pooledRounds?: number;
  /** Ran with the servers on one CPU and the follower process on another (see `pinServers`). */
  pinned?: boolean;
  /** Wall time the scenario took, setup and warm-up included (where a full run's minutes go). */
  durationMs?: number;
  /** Of that, wall time inside subjects' measured runs (warm-up runs included; set-up excluded). */
  runMs?: number;
  /**
   * Bytes the bench process still held after the scenario closed its subjects (after full
   * collections): a subject that leaks makes every later scenario's collections slower.
   */
  heldAfterBytes?: number;
}

export const SESSIONMUX = "sessionmux";

/**
 * How many times better sessionmux is than `subject` (> 1 = better), or NaN if either is missing:
 * the median of the per-round ratios when the scenario ran in rounds, else the figures' ratio.
 */
export function ratioAgainst(result: ScenarioResult, subject: string, of = SESSIONMUX): number {
  if (result.figures.some((f) => f.subject === subject && f.uncompared)) return Number.NaN;
  const stats = roundRatios(result, subject, of);
  if (stats) return stats.median;
  const ours = result.figures.find((f) => f.subject === of)?.value;
  const theirs = result.figures.find((f) => f.subject === subject)?.value;
  if (ours === undefined || theirs === undefined || !(ours > 0) || !(theirs > 0)) return Number.NaN;
  return result.higherIsBetter ? ours / theirs : theirs / ours;
}

export function newScenario(
  id: string,
  title: string,
  unit: string,
  higherIsBetter: boolean,
  goals: Goal[] = [],
): ScenarioResult {
  return { id, title, unit, higherIsBetter, figures: [], goals, notes: [], errors: [] };
}

/** Runs one subject of a scenario; a failure is recorded, not thrown, so the others still report. */
export async function measureSubject(
  result: ScenarioResult,
  subject: string,
  run: () => Promise<{ value: number; detail?: string }>,
): Promise<void> {
  try {
    const { value, detail } = await run();
    result.figures.push({ subject, value, ...(detail ? { detail } : {}) });
  } catch (error) {
    result.errors.push(`${subject}: ${error instanceof Error ? error.message : String(error)}`);
  }
}

export interface RatioStats {
  median: number;
  min: number;
  max: number;
  rounds: number;
}

/**
 * Per-round ratios of sessionmux against `subject` (> 1 = sessionmux better), paired by round, so a
 * round the whole machine ran slow counts against both sides at once. Null when either side has
 * no rounds (then the report falls back to the figures).
 */
export function roundRatios(result: ScenarioResult, subject: string, of = SESSIONMUX): RatioStats | null {
  const ours = result.rounds?.[of];
  const theirs = result.rounds?.[subject];
  if (!ours || !theirs || ours.length === 0 || theirs.length === 0) return null;
  const n = Math.min(ours.length, theirs.length);
  const ratios: number[] = [];
  for (let i = 0; i < n; i++) {
    const a = ours[i]!;
    const b = theirs[i]!;
    if (!(a > 0) || !(b > 0)) continue;
    ratios.push(result.higherIsBetter ? a / b : b / a);
  }
  if (ratios.length === 0) return null;
  return {
    median: median(ratios),
    min: Math.min(...ratios),
    max: Math.max(...ratios),
    rounds: ratios.length,
  };
}
