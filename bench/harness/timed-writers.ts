import type { NewEvent } from "../../protocol/index.js";
import type { GroupCommitStats } from "../../src/store/group-commit.js";
import type { AppendOptions, AppendOutcome } from "../../src/store/session-store.js";

/** Concurrent writers, each making `appendsPerWriter` acknowledged writes one after another. */
export interface AppendShape {
  writers: number;
  appendsPerWriter: number;
}

/**
 * Runs `write(writer, n)` for every writer concurrently, each writer awaiting its writes one at a
 * time; the writes made and the wall time (ms) they took.
 */
export async function timedWriters(
  shape: AppendShape,
  write: (writer: number, n: number) => Promise<unknown>,
): Promise<{ total: number; ms: number }> {
  const started = performance.now();
  await Promise.all(
    Array.from({ length: shape.writers }, async (_, i) => {
      for (let n = 0; n < shape.appendsPerWriter; n++) await write(i, n);
    }),
  );
  return { total: shape.writers * shape.appendsPerWriter, ms: performance.now() - started };
}

/** A store as the append benchmarks drive it: SQLite and PostgreSQL alike. */
export interface AppendingStore {
  append(sessionId: string, events: NewEvent[], options?: AppendOptions): Promise<AppendOutcome>;
  stats(): GroupCommitStats;
}

/**
 * `timedWriters` where writer `i` appends `event(i)` to session `ids[i]` (with `options[i]`, if
 * given) and every append must be acknowledged as appended; also the transactions they took.
 */
export async function timedAppends(
  store: AppendingStore,
  ids: readonly string[],
  shape: AppendShape,
  event: (writer: number) => NewEvent,
  options?: readonly AppendOptions[],
): Promise<{ total: number; ms: number; transactions: number }> {
  const before = store.stats().transactions;
  const timed = await timedWriters(shape, async (i) => {
    const outcome = await store.append(ids[i]!, [event(i)], options?.[i]);
    if (outcome.status !== "appended") throw new Error(`append: ${outcome.status}`);
  });
  return { ...timed, transactions: store.stats().transactions - before };
}
