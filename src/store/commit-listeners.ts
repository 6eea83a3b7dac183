import type { CommitListener, CommitNotice, SessionProjection } from "./session-store.js";
import type { PendingNotice } from "./write-batch.js";

export type GlobalCommitListener = (
  sessionId: string,
  notice: CommitNotice,
  projection: SessionProjection | null,
) => void;

/** What a store does with an exception a commit listener threw. */
export type ListenerErrorHandler = (err: unknown) => void;

/** The `code` of the process warning a listener failure raises when no handler is given. */
export const LISTENER_WARNING_CODE = "SESSIONMUX_COMMIT_LISTENER";

/** The default handler: a process warning (a log line on stderr), never a crash. */
export function warnListenerError(err: unknown): void {
  process.emitWarning(`a commit listener threw: ${err instanceof Error ? err.message : String(err)}`, {
    code: LISTENER_WARNING_CODE,
  });
}

/** Per-session and store-wide commit listeners; notices go out synchronously, in commit order. */
export class CommitListeners {
  private readonly bySession = new Map<string, Set<CommitListener>>();
  private readonly global = new Set<GlobalCommitListener>();

  /** @param onError told of every listener that threw; delivery to the others goes on. */
  constructor(private readonly onError: ListenerErrorHandler = warnListenerError) {}

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

  deliver(notices: readonly PendingNotice[]): void {
    for (const { sessionId, notice, projection } of notices) {
      const set = this.bySession.get(sessionId);
      if (set) for (const listener of [...set]) this.safely(() => listener(notice));
      for (const listener of [...this.global]) this.safely(() => listener(sessionId, notice, projection));
    }
  }

  private safely(run: () => void): void {
    try {
      run();
    } catch (err) {
      // a throwing listener must not stop delivery to the others nor fail the committed writes
      this.onError(err);
    }
  }
}
