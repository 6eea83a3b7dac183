import { clear, createStore, del, entries, get, set, type UseStore } from "idb-keyval";
import type { SessionEvent, SessionRow } from "../../protocol/index.js";
import { newestTurnsWithin } from "./cache-cut.js";
import type { TranscriptSeed } from "./log-window.js";

/**
 * What the console keeps of one session between visits: the stretch of its log it holds, from
 * the start or (a long log read newest first) from a later seq, with what the transcript takes
 * from the log's start then.
 */
export interface CachedSession {
  epoch: string;
  events: SessionEvent[];
  seed?: TranscriptSeed;
}

/** How much the cache may hold; past `totalBytes` the least recently used entries go first. */
export interface CacheLimits {
  /** @default 64 MiB over every partition of this browser profile */
  totalBytes: number;
  /**
   * A session larger than this keeps only its newest turns that fit (the older part is read from
   * the host again); one that cannot (no seed, or no turn's start within it) is not cached.
   * @default 16 MiB
   */
  sessionBytes: number;
}

export const DEFAULT_CACHE_LIMITS: CacheLimits = {
  totalBytes: 64 * 1024 * 1024,
  sessionBytes: 16 * 1024 * 1024,
};

/** The size and last use of one cached entry: the least recently used is evicted first. */
interface Usage {
  bytes: number;
  usedAt: number;
}

/** The two IndexedDB stores: entries, and their usage (small, so eviction never reads the entries). */
export interface CacheStores {
  data: UseStore;
  usage: UseStore;
}

export function openCacheStores(): CacheStores {
  return {
    data: createStore("sessionmux-cache", "entries"),
    usage: createStore("sessionmux-cache-usage", "usage"),
  };
}

/** Clears every partition of this browser profile ("forget this browser"). */
export async function forgetBrowser(stores: CacheStores): Promise<void> {
  await Promise.all([clear(stores.data), clear(stores.usage)]);
}

/** Approximate stored size of an event, computed once per event object. */
const sizes = new WeakMap<object, number>();
function eventBytes(event: SessionEvent): number {
  let size = sizes.get(event);
  if (size === undefined) {
    size = JSON.stringify(event).length;
    sizes.set(event, size);
  }
  return size;
}

/**
 * The console's transcript cache in IndexedDB (asynchronous, so a large session never blocks the
 * page), in one partition per access token held by a tab: two tokens never see each other's
 * cache, and the partition name is random, never derived from the token. Reads are validated
 * loosely: a corrupt entry counts as missing and is rebuilt from the host. Writes run in order,
 * so a `forget` after a `save` always wins.
 */
export class SessionCache {
  private writes: Promise<unknown> = Promise.resolve();
  private closed = false;

  constructor(
    private readonly partition: string,
    private readonly stores: CacheStores = openCacheStores(),
    private readonly limits: CacheLimits = DEFAULT_CACHE_LIMITS,
    private readonly now: () => number = Date.now,
  ) {}

  private key(name: string): string {
    return `${this.partition}/${name}`;
  }

  async load(sessionId: string): Promise<CachedSession | undefined> {
    const key = this.key(`s/${sessionId}`);
    const value = (await this.read(key)) as Partial<CachedSession> | undefined;
    if (!value || typeof value.epoch !== "string" || !Array.isArray(value.events)) return undefined;
    const events = value.events;
    // A cached log must be unbroken, and one that starts later than seq 1 must say what the
    // transcript takes from the log's start; anything else is rebuilt rather than trusted.
    const first = (events[0] as Partial<SessionEvent> | undefined)?.seq ?? 1;
    const seed = value.seed;
    if (!Number.isSafeInteger(first) || first < 1) return undefined;
    if (first > 1 && (typeof seed !== "object" || seed === null || typeof seed.title !== "string"))
      return undefined;
    for (let i = 0; i < events.length; i++) if (events[i]?.seq !== first + i) return undefined;
    this.touch(key);
    return { epoch: value.epoch, events, ...(first > 1 && seed ? { seed } : {}) };
  }

  save(sessionId: string, entry: CachedSession): Promise<void> {
    let bytes = entry.epoch.length;
    for (const event of entry.events) bytes += eventBytes(event);
    let from = 0;
    if (bytes > this.limits.sessionBytes) {
      // a part starting past seq 1 is read back only with its seed
      from = entry.seed
        ? newestTurnsWithin(entry.events, this.limits.sessionBytes, entry.epoch.length, eventBytes)
        : -1;
      if (from < 0) return this.forget(sessionId);
      for (let i = 0; i < from; i++) bytes -= eventBytes(entry.events[i]!);
    }
    // A copy of the list: the caller goes on appending while the write waits its turn.
    return this.write(
      this.key(`s/${sessionId}`),
      { epoch: entry.epoch, events: entry.events.slice(from), ...(entry.seed ? { seed: entry.seed } : {}) },
      bytes,
    );
  }

  forget(sessionId: string): Promise<void> {
    const key = this.key(`s/${sessionId}`);
    return this.enqueue(() => Promise.all([del(key, this.stores.data), del(key, this.stores.usage)]));
  }

  async loadRows(): Promise<SessionRow[]> {
    const rows = await this.read(this.key("rows"));
    return Array.isArray(rows) ? (rows as SessionRow[]).filter((r) => typeof r?.sessionId === "string") : [];
  }

  saveRows(rows: SessionRow[]): Promise<void> {
    return this.write(this.key("rows"), rows, JSON.stringify(rows).length);
  }

  /** Drops every later write (the browser is being forgotten; a last save on page hide must not undo it). */
  close(): void {
    this.closed = true;
  }

  /** Waits for every write queued so far. */
  settled(): Promise<void> {
    return this.writes.then(() => undefined);
  }

  private async read(key: string): Promise<unknown> {
    try {
      return await get(key, this.stores.data);
    } catch {
      return undefined;
    }
  }

  private touch(key: string): void {
    void this.enqueue(async () => {
      const usage = (await get(key, this.stores.usage)) as Usage | undefined;
      if (usage) await set(key, { ...usage, usedAt: this.now() } satisfies Usage, this.stores.usage);
    });
  }

  private write(key: string, value: unknown, bytes: number): Promise<void> {
    return this.enqueue(async () => {
      await set(key, value, this.stores.data);
      await set(key, { bytes, usedAt: this.now() } satisfies Usage, this.stores.usage);
      await this.evict(key);
    });
  }

  /** Drops the least recently used entries of any partition until the total fits again. */
  private async evict(keep: string): Promise<void> {
    const usage = await entries<string, Usage>(this.stores.usage);
    let total = usage.reduce((sum, [, u]) => sum + (u?.bytes ?? 0), 0);
    if (total <= this.limits.totalBytes) return;
    usage.sort((a, b) => (a[1]?.usedAt ?? 0) - (b[1]?.usedAt ?? 0));
    for (const [key, u] of usage) {
      if (total <= this.limits.totalBytes) break;
      if (key === keep) continue;
      await Promise.all([del(key, this.stores.data), del(key, this.stores.usage)]);
      total -= u?.bytes ?? 0;
    }
  }

  /** Runs cache writes one at a time; a failed write (quota, a closed database) is a miss, not a fault. */
  private enqueue(op: () => Promise<unknown>): Promise<void> {
    const run = this.writes
      .then(() => (this.closed ? undefined : op()))
      .then(
        () => undefined,
        () => undefined,
      );
    this.writes = run;
    return run;
  }
}
