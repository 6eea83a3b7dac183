/**
 * One checker of a consumer's history against the acknowledged log, after Jepsen's queue checker.
 * Every torture scenario reports through it so "lost" or "phantom" mean the same thing everywhere.
 *
 * - lost: acknowledged, yet absent from the durable log, or (for a complete follower) never delivered
 * - duplicate: delivered more than once
 * - gap: a delivery skipped seqs (counted per missing seq), or the durable log has a hole below its head
 * - reorder: a delivery went backwards (below the highest seq seen so far) without being a duplicate
 * - phantom: delivered, yet not in the durable log (never committed)
 * - resurrected: a seq that exists, was acknowledged or was delivered after the session's tombstone
 */
export interface HistoryInput {
  /** Seqs whose append promise resolved: the promise under test. */
  acknowledged?: Iterable<number>;
  /** Seqs present in the durable log at the end; when given, it must be exactly 1..head. */
  log?: Iterable<number>;
  /** Seqs in delivery order, as one follower or consumer saw them. */
  observed?: readonly number[];
  /**
   * Whether `observed` is expected to cover everything acknowledged (a follower that ended caught up).
   * @default true
   */
  complete?: boolean;
  /** Seqs acknowledged, delivered or still stored after the session's tombstone was acknowledged. */
  afterTombstone?: Iterable<number>;
  /**
   * Accept a history with no acknowledged seq. Off by default: a scenario whose writes were never
   * acknowledged (or whose acks were not recorded) proves nothing and must not pass as clean.
   * @default false
   */
  allowEmpty?: boolean;
}

export interface HistoryCounts {
  acked: number;
  lost: number;
  dup: number;
  gap: number;
  reorder: number;
  phantom: number;
  resurrected: number;
}

export interface HistoryReport extends HistoryCounts {
  /** A few offending seqs per category, for the failure message. */
  examples: Partial<Record<Exclude<keyof HistoryCounts, "acked">, number[]>>;
}

const EXAMPLES = 10;

/** Checks one history; throws when it is empty or has nothing to check the acknowledged seqs against. */
export function checkHistory(input: HistoryInput): HistoryReport {
  const acknowledged = new Set(input.acknowledged ?? []);
  if (acknowledged.size === 0 && !input.allowEmpty)
    throw new Error("empty history: no acknowledged seq (pass the seqs the acks carried, or allowEmpty)");
  if (input.log === undefined && input.observed === undefined)
    throw new Error("incomplete history: neither the durable log nor an observed delivery to check against");
  const log = input.log === undefined ? undefined : new Set(input.log);
  const report: HistoryReport = {
    acked: acknowledged.size,
    lost: 0,
    dup: 0,
    gap: 0,
    reorder: 0,
    phantom: 0,
    resurrected: 0,
    examples: {},
  };
  const note = (category: keyof HistoryReport["examples"], seq: number, weight = 1): void => {
    report[category] += weight;
    const list = report.examples[category] ?? [];
    report.examples[category] = list;
    if (list.length < EXAMPLES) list.push(seq);
  };

  const lost = new Set<number>();
  if (log) {
    for (const seq of acknowledged) if (!log.has(seq)) lost.add(seq);
    let head = 0;
    for (const seq of log) head = Math.max(head, seq);
    for (let seq = 1; seq <= head; seq++) if (!log.has(seq)) note("gap", seq);
  }

  if (input.observed) {
    const seen = new Set<number>();
    let highest = 0;
    for (const seq of input.observed) {
      if (seen.has(seq)) {
        note("dup", seq);
        continue;
      }
      seen.add(seq);
      if (log && !log.has(seq)) note("phantom", seq);
      if (seq < highest) note("reorder", seq);
      else if (seq > highest + 1) note("gap", highest + 1, seq - highest - 1);
      highest = Math.max(highest, seq);
    }
    if (input.complete ?? true) for (const seq of acknowledged) if (!seen.has(seq)) lost.add(seq);
  }
  for (const seq of [...lost].sort((a, b) => a - b)) note("lost", seq);

  for (const seq of new Set(input.afterTombstone ?? [])) note("resurrected", seq);
  return report;
}

/** Sums reports of several runs or followers into one. */
export function sumCounts(reports: readonly HistoryCounts[]): HistoryCounts {
  const total: HistoryCounts = { acked: 0, lost: 0, dup: 0, gap: 0, reorder: 0, phantom: 0, resurrected: 0 };
  for (const r of reports) {
    total.acked += r.acked;
    total.lost += r.lost;
    total.dup += r.dup;
    total.gap += r.gap;
    total.reorder += r.reorder;
    total.phantom += r.phantom;
    total.resurrected += r.resurrected;
  }
  return total;
}

/** The counts of the history checker as one line, the format every torture scenario prints. */
export function formatCounts(scenario: string, runs: number, counts: HistoryCounts): string {
  return (
    `torture ${scenario}: runs=${runs} acked=${counts.acked} lost=${counts.lost} dup=${counts.dup} ` +
    `gap=${counts.gap} reorder=${counts.reorder} phantom=${counts.phantom} resurrected=${counts.resurrected}`
  );
}

/** True when no category but `acked` is non-zero. */
export function isClean(counts: HistoryCounts): boolean {
  return counts.lost + counts.dup + counts.gap + counts.reorder + counts.phantom + counts.resurrected === 0;
}
