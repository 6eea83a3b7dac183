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
    }
  | { kind: "turn-flag"; key: string; turn: TranscriptTurn };

const FLAGGED = new Set(["interrupted", "failed", "cancelled"]);

/**
 * The rows of a transcript, keyed by message (or turn) id so a row keeps its element while the
 * transcript grows. The reducer copies what it touches, so a row whose `msg` is the same object
 * as last time has not changed.
 */
export function transcriptRows(state: TranscriptState): TranscriptRow[] {
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
      });
    }
    const turn = m.turnId ? flagged.get(m.turnId) : undefined;
    if (turn && lastIndexOfTurn.get(turn.turnId) === i)
      out.push({ kind: "turn-flag", key: `f:${turn.turnId}`, turn });
  });
  return out;
}
