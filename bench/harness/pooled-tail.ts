import type { Figure } from "./result.js";
import { percentile } from "./stats.js";

/**
 * Each subject's tail percentile over the samples of all its measured rounds, pooled. One
 * round's p99 is set by its few slowest samples (3 of 300 appends, each seen by every follower),
 * so one scheduler hiccup on a shared machine moves it: per-round p99 ratios spread from 0.13× to
 * 1.46× in one run. The rounds alternate the subjects, so pooling them keeps drift shared while
 * the percentile rests on seven times as many samples. `warmup`: leading rounds to leave out.
 */
export function pooledTail(samplesByRound: Record<string, number[][]>, p: number, warmup: number): Figure[] {
  return Object.entries(samplesByRound).map(([subject, rounds]) => {
    const measured = rounds.slice(warmup);
    const pooled = measured.flat();
    const perRound = measured.map((samples) => percentile(samples, p));
    const low = Math.min(...perRound);
    const high = Math.max(...perRound);
    return {
      subject,
      value: percentile(pooled, p),
      detail: `p${p} of ${pooled.length} samples pooled from ${measured.length} rounds (per round ${low.toFixed(2)}–${high.toFixed(2)} ms)`,
    };
  });
}
