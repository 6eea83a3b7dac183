import type { SessionStore } from "../../src/store/session-store.js";

/** Store methods that only read: they are delayed both ways and may complete in any order. */
const READS = new Set<string>([
  "header",
  "projection",
  "page",
  "readAfter",
  "readAfterEncoded",
  "list",
  "search",
  "isRetired",
  "ownerStoredBytes",
  "findPrompt",
  "getAttachment",
]);

export interface AsyncStoreOptions {
  /** @default Math.random — seed it to replay a failing interleaving. */
  random?: () => number;
  /** Longest delay before a read runs and again before its result is handed back, in ms. @default 4 */
  maxDelayMs?: number;
  /** Share of delays that are ten times longer: a networked store's latency tail. @default 0.05 */
  slowShare?: number;
}

export interface AsyncStoreStats {
  /** Reads that completed after a read issued later than them. */
  reorderedReads: number;
  /** Commits that happened while a read of the same store was in flight. */
  commitsDuringReads: number;
}

/** A seedable PRNG (mulberry32), so an interleaving can be replayed from its seed. */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * The real store seen as an asynchronous one (as PostgreSQL is): every read waits a random time
 * before it runs (commits land meanwhile, so the read overlaps notices already buffered) and
 * again before its result is handed back (commits land after the read's snapshot), and reads
 * complete out of order. The interface's ordering promises still hold: writes run in call order
 * and settle in that order, and commit notices are the real store's (synchronous, in commit
 * order, before the write settles). A Proxy, so methods added to the store later are wrapped
 * too: an unknown method returning a promise is treated as a write.
 */
export function asyncStore<S extends SessionStore>(
  inner: S,
  options: AsyncStoreOptions = {},
): { store: S; stats: AsyncStoreStats } {
  const random = options.random ?? Math.random;
  const maxDelayMs = options.maxDelayMs ?? 4;
  const stats: AsyncStoreStats = { reorderedReads: 0, commitsDuringReads: 0 };
  const slowShare = options.slowShare ?? 0.05;
  const delay = () =>
    new Promise<void>((resolve) =>
      setTimeout(resolve, random() * maxDelayMs * (random() < slowShare ? 10 : 1)),
    );
  let issued = 0;
  let newestCompleted = 0;
  let readsInFlight = 0;
  /** Writes settle in call order: each waits for the one before it. */
  let lastWrite: Promise<unknown> = Promise.resolve();

  inner.subscribeAll(() => {
    if (readsInFlight > 0) stats.commitsDuringReads++;
  });

  const read = async (run: () => Promise<unknown>) => {
    const order = ++issued;
    readsInFlight++;
    try {
      await delay();
      const result = await run();
      await delay();
      if (order < newestCompleted) stats.reorderedReads++;
      newestCompleted = Math.max(newestCompleted, order);
      return result;
    } finally {
      readsInFlight--;
    }
  };

  const write = (run: () => Promise<unknown>) => {
    const committed = run(); // issued now: commit order is call order
    const settled = Promise.allSettled([committed, lastWrite])
      .then(delay)
      .then(() => committed);
    lastWrite = settled.catch(() => {});
    return settled;
  };

  const store = new Proxy(inner, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver) as unknown;
      if (typeof value !== "function" || typeof property !== "string") return value;
      const method = value as (...args: unknown[]) => unknown;
      return (...args: unknown[]) => {
        if (READS.has(property)) return read(() => method.apply(target, args) as Promise<unknown>);
        const result = method.apply(target, args);
        return result instanceof Promise ? write(() => result) : result;
      };
    },
  });
  return { store, stats };
}
