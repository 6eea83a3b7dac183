import type {
  AssistantTranscriptMessage,
  TranscriptState,
  TranscriptTurn,
  UserTranscriptMessage,
} from "../../protocol/transcript.js";

/** One row of the transcript as drawn: a message, or the mark of a turn that did not complete. */
export type TranscriptRow =
  | { kind: "user"; key: string; msg: UserTranscriptMessage }
  | {
      kind: "assistant";
      key: string;
      msg: AssistantTranscriptMessage;
      /** Output of the open turn may arrive here now (not while the turn waits on a person). */
      streaming: boolean;
      /** Interaction ids of this message still waiting for an answer. */
      pending: readonly string[];
      /** Its turn ended: a tool call without a result now will never get one. */
      turnEnded: boolean;
      /** When the session was forked, for a fork (see `forkedAt`). */
      forkedAt: number | null;
    }
  | {
      kind: "turn-flag";
      key: string;
      turn: TranscriptTurn;
      /** The turn was still running in the source when this fork was made: the fork ended it. */
      forkCut: boolean;
    };

const FLAGGED = new Set(["interrupted", "failed", "cancelled"]);

/**
 * The rows of a transcript, keyed by message (or turn) id so a row keeps its element while the
 * transcript grows. The reducer copies what it touches, so a row whose `msg` is the same object
 * as last time has not changed.
 */
export function transcriptRows(state: TranscriptState): TranscriptRow[] {
  const at = forkedAt(state);
  const pendingIds = new Set(state.pending.map((p) => p.interactionId));
  // A turn blocked on a person's answer writes nothing until it gets one: no typing caret meanwhile.
  const waiting = state.pending.some((p) => p.turnId === state.openTurnId);
  const flagged = new Map(state.turns.filter((t) => FLAGGED.has(t.state)).map((t) => [t.turnId, t]));
  const ended = new Set(state.turns.filter((t) => t.endedAt !== null).map((t) => t.turnId));
  const lastIndexOfTurn = new Map<string, number>();
  state.messages.forEach((m, i) => {
    if (m.turnId) lastIndexOfTurn.set(m.turnId, i);
  });
  const out: TranscriptRow[] = [];
  state.messages.forEach((m, i) => {
    if (m.role === "user") {
      if (!m.hidden) out.push({ kind: "user", key: `u:${m.id}`, msg: m });
    } else {
      const pending: string[] = [];
      for (const s of m.segments) {
        if (s.kind === "block" && pendingIds.has(s.block.interactionId)) pending.push(s.block.interactionId);
      }
      out.push({
        kind: "assistant",
        key: `a:${m.id}`,
        msg: m,
        streaming: state.streaming && !waiting && i === state.tail,
        pending,
        turnEnded: ended.has(m.turnId),
        forkedAt: at,
      });
    }
    const turn = m.turnId ? flagged.get(m.turnId) : undefined;
    if (turn && lastIndexOfTurn.get(turn.turnId) === i)
      out.push({
        kind: "turn-flag",
        key: `f:${turn.turnId}`,
        turn,
        forkCut: cutByFork(turn, at),
      });
  });
  return out;
}

/**
 * When a fork was made (null for a session that is none). A fork ends what its copied log left
 * running (the open turn, its jobs) as interrupted in the write that makes it, at the fork's own
 * time: an end at that time is the fork's, not a host's stop.
 */
export function forkedAt(state: TranscriptState): number | null {
  return state.forkOf !== null ? state.createdAt : null;
}

/** A turn or job ended as interrupted by the fork that made this session (`forkedAt`), not by a host's stop. */
export function cutByFork(ended: { state: string; endedAt: number | null }, at: number | null): boolean {
  return ended.state === "interrupted" && at !== null && ended.endedAt === at;
}
