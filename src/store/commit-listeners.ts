import type { LiveStateNotice } from "./live-state-store.js";
import type { CommitListener, CommitNotice, SessionProjection } from "./session-store.js";
import type { PendingNotice } from "./write-batch.js";

export type GlobalCommitListener = (
  sessionId: string,
  notice: CommitNotice,
  projection: SessionProjection | null,
) => void;

/**
 * Per-session and store-wide commit listeners, and live-state listeners; notices go out
 * synchronously, in commit order.
 */
export class CommitListeners {
  private readonly bySession = new Map<string, Set<CommitListener>>();
  private readonly global = new Set<GlobalCommitListener>();
  private readonly live = new Set<(notice: LiveStateNotice) => void>();

  subscribe(sessionId: string, listener: CommitListener): () => void {
    let set = this.bySession.get(sessionId);
    if (!set) {
      set = new Set();
      this.bySession.set(sessionId, set);
    }
    set.add(listener);
    return () => {
      const current = this.bySession.get(sessionId);
      current?.delete(listener);
      if (current?.size === 0) this.bySession.delete(sessionId);
    };
  }

  subscribeAll(listener: GlobalCommitListener): () => void {
    this.global.add(listener);
    return () => this.global.delete(listener);
  }

  subscribeLive(listener: (notice: LiveStateNotice) => void): () => void {
    this.live.add(listener);
    return () => this.live.delete(listener);
  }

  /** A transaction's commit notices, then its live-state notices. */
  deliver(notices: readonly PendingNotice[], liveNotices: readonly LiveStateNotice[] = []): void {
    this.deliverCommits(notices);
    for (const notice of liveNotices) {
      for (const listener of [...this.live]) safely(() => listener(notice));
    }
  }

  private deliverCommits(notices: readonly PendingNotice[]): void {
    for (const { sessionId, notice, projection } of notices) {
      const set = this.bySession.get(sessionId);
      if (set) for (const listener of [...set]) safely(() => listener(notice));
      for (const listener of [...this.global]) safely(() => listener(sessionId, notice, projection));
    }
  }
}

function safely(run: () => void): void {
  try {
    run();
  } catch (err) {
    // a throwing listener must not stop delivery to the others nor fail the committed writes
    process.emitWarning(`a store listener threw: ${err instanceof Error ? err.message : String(err)}`);
  }
}
