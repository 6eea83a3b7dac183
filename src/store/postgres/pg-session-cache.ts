import type { SessionState } from "../session-state.js";

/** A session's state as a committed transaction left it, and that transaction's id (the row's version). */
export interface KeptSession {
  state: SessionState;
  version: number;
}

/** Sessions kept at most; the least recently written go first. */
const DEFAULT_CAPACITY = 4096;

/**
 * The states this host's last transactions committed, so a batch touching only kept sessions skips
 * the round trip that locks and reads them. A kept state is never trusted on its own: the batch
 * sends the versions it used with its writes, and the database refuses the whole transaction, under
 * the row locks, when any row was written since (by any host) or is gone (deleted). A batch takes
 * the states out and puts back only what it committed, so a state is either kept or in one batch,
 * and a batch that fails leaves nothing behind to be read again.
 */
export class PgSessionCache {
  private readonly kept = new Map<string, KeptSession>();

  constructor(private readonly capacity = DEFAULT_CAPACITY) {}

  /** Takes out every listed session, or none (null) when one is not kept. */
  take(sessionIds: readonly string[]): Map<string, KeptSession> | null {
    for (const id of sessionIds) if (!this.kept.has(id)) return null;
    const taken = new Map<string, KeptSession>();
    for (const id of sessionIds) {
      const entry = this.kept.get(id);
      if (entry) taken.set(id, entry);
      this.kept.delete(id);
    }
    return taken;
  }

  /** Keeps the state as committed by the transaction that wrote its row at `version`. */
  keep(state: SessionState, version: number): void {
    this.kept.delete(state.sessionId);
    this.kept.set(state.sessionId, { state, version });
    if (this.kept.size > this.capacity) this.kept.delete(this.kept.keys().next().value!);
  }

  forget(sessionIds: Iterable<string>): void {
    for (const id of sessionIds) this.kept.delete(id);
  }

  clear(): void {
    this.kept.clear();
  }

  get size(): number {
    return this.kept.size;
  }
}
