import type { SessionEvent, SessionRow } from "../../protocol/index.js";

/** What the console keeps of one session between visits: the log prefix it has applied. */
export interface CachedSession {
  epoch: string;
  events: SessionEvent[];
}

interface CacheIndex {
  /** sessionId → last write time, for evicting the stalest session when storage is full. */
  touched: Record<string, number>;
}

/** A short, non-secret tag of the token so two principals on one origin never share a cache. */
function fingerprint(token: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < token.length; i++) {
    h ^= token.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0).toString(36);
}

/**
 * The local cache, in `localStorage` so a reload can paint the transcript synchronously before the
 * socket opens. Every read is validated loosely: a corrupt entry counts as missing and is rebuilt
 * from the host.
 */
export class SessionCache {
  private readonly prefix: string;

  constructor(
    private readonly storage: Storage,
    token: string,
  ) {
    this.prefix = `sessionmux.v1.${fingerprint(token)}.`;
  }

  load(sessionId: string): CachedSession | undefined {
    const value = this.read(`s.${sessionId}`) as Partial<CachedSession> | undefined;
    if (!value || typeof value.epoch !== "string" || !Array.isArray(value.events)) return undefined;
    const events = value.events;
    // A cached log must be 1..n with no hole; anything else is rebuilt rather than trusted.
    for (let i = 0; i < events.length; i++) if (events[i]?.seq !== i + 1) return undefined;
    return { epoch: value.epoch, events };
  }

  save(sessionId: string, entry: CachedSession): void {
    const key = `s.${sessionId}`;
    const index = this.index();
    index.touched[sessionId] = Date.now();
    if (this.write(key, entry)) {
      this.write("index", index);
      return;
    }
    // Storage full: drop the stalest other sessions until this one fits, then give up on it.
    const others = Object.entries(index.touched)
      .filter(([id]) => id !== sessionId)
      .sort((a, b) => a[1] - b[1]);
    for (const [id] of others) {
      this.forget(id);
      delete index.touched[id];
      if (this.write(key, entry)) {
        this.write("index", index);
        return;
      }
    }
    this.forget(sessionId);
  }

  forget(sessionId: string): void {
    this.storage.removeItem(this.prefix + `s.${sessionId}`);
  }

  loadRows(): SessionRow[] {
    const rows = this.read("rows");
    return Array.isArray(rows) ? (rows as SessionRow[]).filter((r) => typeof r?.sessionId === "string") : [];
  }

  saveRows(rows: SessionRow[]): void {
    this.write("rows", rows);
  }

  private index(): CacheIndex {
    const value = this.read("index") as Partial<CacheIndex> | undefined;
    return { touched: value?.touched && typeof value.touched === "object" ? value.touched : {} };
  }

  private read(key: string): unknown {
    try {
      const raw = this.storage.getItem(this.prefix + key);
      return raw === null ? undefined : JSON.parse(raw);
    } catch {
      return undefined;
    }
  }

  private write(key: string, value: unknown): boolean {
    try {
      this.storage.setItem(this.prefix + key, JSON.stringify(value));
      return true;
    } catch {
      return false;
    }
  }
}
