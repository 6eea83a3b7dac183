/** One measured figure of one subject (sessionmux, a baseline or a peer) in one scenario. */
export interface Figure {
  subject: string;
  value: number;
  /** What was done, e.g. "20,000 events × 100 followers". */
  detail?: string;
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
}

export const SESSIONMUX = "sessionmux";

/** How many times better sessionmux is than `subject` (> 1 = better), or NaN if either is missing. */
export function ratioAgainst(result: ScenarioResult, subject: string, of = SESSIONMUX): number {
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
