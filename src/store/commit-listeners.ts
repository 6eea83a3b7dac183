import { ListenerList } from "./listener-list.js";
import type { LiveStateNotice } from "./live-state-store.js";
import type { CommitListener, CommitNotice, SessionProjection } from "./session-store.js";
import type { PendingNotice } from "./write-batch.js";

export type GlobalCommitListener = (
  sessionId: string,
  notice: CommitNotice,
  projection: SessionProjection | null,
) => void;

/** Where the store reports faults that are not a caller's outcome (pino-compatible). */
export interface StoreFaultLog {
  error(obj: object, msg: string): void;
  /** Faults that lost nothing (a final checkpoint a full disk refused); a process warning without it. */
  warn?(obj: object, msg: string): void;
}

/** The `code` of the process warning a listener failure raises when the store has no log. */
export const LISTENER_WARNING_CODE = "SESSIONMUX_COMMIT_LISTENER";

/** Without a log, a fault still surfaces as a process warning rather than nowhere. */
const warningLog: StoreFaultLog = {
  error: (obj, msg) => {
    const err = (obj as { err?: unknown }).err;
    process.emitWarning(`${msg}: ${err instanceof Error ? err.message : String(err)}`, {
      code: LISTENER_WARNING_CODE,
    });
  },
};

/**
 * Per-session and store-wide commit listeners, and live-state listeners; notices go out
 * synchronously, in commit order.
 */
export class CommitListeners {
  private readonly bySession = new Map<string, ListenerList<CommitListener>>();
  private readonly global = new ListenerList<GlobalCommitListener>();
  private readonly live = new ListenerList<(notice: LiveStateNotice) => void>();

  /**
   * @param log told of every listener that threw; delivery to the others goes on
   * @param failed counts those failures (a metric)
   */
  constructor(
    private readonly log: StoreFaultLog = warningLog,
    private readonly failed?: () => void,
  ) {}

  subscribe(sessionId: string, listener: CommitListener): () => void {
    let list = this.bySession.get(sessionId);
    if (!list) {
      list = new ListenerList();
      this.bySession.set(sessionId, list);
    }
    list.add(listener);
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
      const sessionId =
        notice.kind === "interaction.requested" ? notice.interaction.sessionId : notice.sessionId;
      for (const listener of this.live.current()) {
        try {
          listener(notice);
        } catch (err) {
          this.threw(sessionId, err);
        }
      }
    }
  }

  /** Once per listener per notice (thousands per commit under fanout): no closure nor copy per call. */
  private deliverCommits(notices: readonly PendingNotice[]): void {
    for (const { sessionId, notice, projection } of notices) {
      const list = this.bySession.get(sessionId);
      if (list) {
        for (const listener of list.current()) {
          try {
            listener(notice);
          } catch (err) {
            this.threw(sessionId, err);
          }
        }
      }
      for (const listener of this.global.current()) {
        try {
          listener(sessionId, notice, projection);
        } catch (err) {
          this.threw(sessionId, err);
        }
      }
    }
  }

  /** A throwing listener must not stop delivery to the others nor fail the committed writes. */
  private threw(sessionId: string, err: unknown): void {
    this.failed?.();
    this.log.error({ err, sessionId }, "a commit listener threw");
  }
}
