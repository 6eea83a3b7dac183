import { formatCounts, type HistoryCounts } from "../support/history-checker.js";

/** `TORTURE_SCALE` (default 1; the nightly run uses 10) multiplies every count of the suite. */
export const TORTURE_SCALE = Math.max(1, Number(process.env.TORTURE_SCALE ?? "1") || 1);

export function scaled(count: number): number {
  return Math.round(count * TORTURE_SCALE);
}

/** Prints the scenario's history-checker line; every torture scenario ends with one. */
export function reportCounts(scenario: string, runs: number, counts: HistoryCounts): void {
  process.stdout.write(`${formatCounts(scenario, runs, counts)}\n`);
}
