import type { FollowItem, SessionEvent } from "../../protocol/index.js";

/** Where a follower stands: the epoch it mirrors and the last seq it applied. */
export interface FollowCursor {
  readonly epoch: string | undefined;
  readonly seq: number;
  /** True once the host said replay of the current epoch reached the head on this stream (§5 `caughtUp`). */
  readonly caughtUp: boolean;
}

/** What `followSession` tells its subscriber. Every update carries the cursor after it. */
export type FollowUpdate =
  | {
      readonly kind: "opened";
      readonly epoch: string;
      readonly headSeq: number;
      readonly cursor: FollowCursor;
    }
  | { readonly kind: "reset"; readonly epoch: string; readonly cursor: FollowCursor }
  | { readonly kind: "events"; readonly events: SessionEvent[]; readonly cursor: FollowCursor }
  | { readonly kind: "caughtUp"; readonly seq: number; readonly cursor: FollowCursor }
  /**
   * The stream was lost (or dropped to repair a gap) and is being reopened: until the next `caughtUp` the follower may be behind
   * the host, so its cursor says `caughtUp: false`.
   */
  | { readonly kind: "interrupted"; readonly cursor: FollowCursor };

/** The outcome of applying one `session.follow` item to a cursor. */
export type FollowStep =
  | { readonly ok: true; readonly cursor: FollowCursor; readonly update: FollowUpdate | undefined }
  | {
      readonly ok: false;
      readonly cursor: FollowCursor;
      readonly expectedSeq: number;
      readonly gotSeq: number;
    };

/** The cursor of a follower that has applied everything up to `seq`. */
export function initialCursor(seq = 0, epoch?: string): FollowCursor {
  return { epoch, seq, caughtUp: false };
}

/** The cursor of a follower whose stream was lost: it keeps what it applied but is no longer caught up. */
export function interruptedCursor(cursor: FollowCursor): FollowCursor {
  return cursor.caughtUp ? { ...cursor, caughtUp: false } : cursor;
}

/** The params to (re)open `session.follow` from a cursor: after the last applied seq, in its epoch. */
export function reopenParams(
  sessionId: string,
  cursor: FollowCursor,
): {
  sessionId: string;
  afterSeq: number;
  epoch?: string;
} {
  return cursor.epoch === undefined
    ? { sessionId, afterSeq: cursor.seq }
    : { sessionId, afterSeq: cursor.seq, epoch: cursor.epoch };
}

/**
 * Applies one follow item (§5). Events at or below the cursor are dropped (a replay overlapping
 * what was already applied); a gap is reported, never applied, so the caller can reopen.
 */
export function applyFollowItem(cursor: FollowCursor, item: FollowItem): FollowStep {
  switch (item.kind) {
    case "opened": {
      // A cursor in another epoch keeps it until the `reset` that follows: the host's epoch with
      // this cursor's seq never existed, and a stream reopened from it would skip the new log's
      // first events (or end `cursor_ahead`) instead of being reset again.
      const epoch = cursor.epoch ?? item.epoch;
      const next = { epoch, seq: cursor.seq, caughtUp: false };
      return {
        ok: true,
        cursor: next,
        update: { kind: "opened", epoch: item.epoch, headSeq: item.headSeq, cursor: next },
      };
    }
    case "reset": {
      const next = { epoch: item.epoch, seq: 0, caughtUp: false };
      return { ok: true, cursor: next, update: { kind: "reset", epoch: item.epoch, cursor: next } };
    }
    case "events": {
      const fresh: SessionEvent[] = [];
      let seq = cursor.seq;
      for (const event of item.events) {
        if (event.seq <= seq) continue;
        if (event.seq !== seq + 1) return { ok: false, cursor, expectedSeq: seq + 1, gotSeq: event.seq };
        fresh.push(event as SessionEvent);
        seq = event.seq;
      }
      if (fresh.length === 0) return { ok: true, cursor, update: undefined };
      const next = { ...cursor, seq };
      return { ok: true, cursor: next, update: { kind: "events", events: fresh, cursor: next } };
    }
    case "caughtUp": {
      const next = { ...cursor, caughtUp: true };
      return { ok: true, cursor: next, update: { kind: "caughtUp", seq: item.seq, cursor: next } };
    }
  }
}
