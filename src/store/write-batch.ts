import type { LiveStateNotice } from "./live-state-store.js";
import { OwnerDataBytes } from "./owner-data-bytes.js";
import type { SessionState } from "./session-state.js";
import type { CommitNotice, SessionProjection } from "./session-store.js";

/** A commit notice waiting for its transaction to commit. */
export interface PendingNotice {
  sessionId: string;
  notice: CommitNotice;
  projection: SessionProjection | null;
  /**
   * A dismissal's principal and new state: told to other hosts (which tell that principal's
   * sockets) and never to this store's commit listeners.
   */
  dismissal?: { principal: string; dismissed: boolean };
}

/**
 * What one group-commit transaction accumulates: sessions whose head and projection must be
 * written before COMMIT (once per session, however many appends touched it) and the notices to
 * deliver after it.
 */
export class WriteBatch {
  readonly dirty = new Map<string, SessionState>();
  readonly notices: PendingNotice[] = [];
  /** Live-state notices, delivered after the commit notices of the same transaction. */
  readonly liveNotices: LiveStateNotice[] = [];
  appendedEvents = 0;
  /** Stored event data this transaction moved per owner, written with its commit. */
  readonly ownerDataBytes = new OwnerDataBytes();
  /** Logs this transaction left to the purger (clears, deletes): it is woken after the commit. */
  purges = 0;

  touch(state: SessionState): void {
    this.dirty.set(state.sessionId, state);
  }

  forget(sessionId: string): void {
    this.dirty.delete(sessionId);
  }

  notify(sessionId: string, notice: CommitNotice, projection: SessionProjection | null): void {
    this.notices.push({ sessionId, notice, projection });
  }

  notifyLive(notice: LiveStateNotice): void {
    this.liveNotices.push(notice);
  }
}
