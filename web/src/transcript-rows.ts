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
      /** Its jobs a fork ended (`cutByFork`). */
      forkCutJobs: readonly string[];
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
  const fork = forkPoint(state);
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
        forkCutJobs: m.jobs.filter((j) => cutByFork(j, copied(m.seq, m.at, fork), fork)).map((j) => j.jobId),
      });
    }
    const turn = m.turnId ? flagged.get(m.turnId) : undefined;
    if (turn && lastIndexOfTurn.get(turn.turnId) === i)
      out.push({
        kind: "turn-flag",
        key: `f:${turn.turnId}`,
        turn,
        forkCut: cutByFork(turn, copied(turn.startSeq, turn.startedAt, fork), fork),
      });
  });
  return out;
}

/**
 * What began at `seq`, `at` is in the part of the log the fork copied from its source. Its time
 * too: a fork cleared since keeps its lineage in its header while its new log counts seqs anew.
 */
function copied(seq: number, at: number, fork: ForkPoint | null): boolean {
  return fork !== null && seq <= fork.seq && at <= fork.at;
}

/** Where a fork was made: its own time, and the last seq its log copied from its source. */
export interface ForkPoint {
  readonly at: number;
  readonly seq: number;
}

/** Where this session was forked (null for a session that is none). */
export function forkPoint(state: TranscriptState): ForkPoint | null {
  return state.forkOf !== null && state.createdAt !== null
    ? { at: state.createdAt, seq: state.forkOf.seq }
    : null;
}

/**
 * A turn or job a fork ended, not a host's stop: it ran on in the source only. `copied`: it began
 * in the part of the log the fork copied (at or before `fork.seq`). Read from:
 * - the end the fork wrote, marked `byFork`; a fork of a fork copies it with the rest;
 * - for forks made before ends were marked: an `interrupted` end at the fork's own time;
 * - for forks made before they ended the jobs they copied running: a copied job still running,
 *   which nothing in the fork will ever end.
 */
export function cutByFork(
  work: { state: string; endedAt: number | null; byFork?: true },
  copied: boolean,
  fork: ForkPoint | null,
): boolean {
  if (work.byFork) return true;
  if (fork === null || !copied) return false;
  return work.state === "running" || (work.state === "interrupted" && work.endedAt === fork.at);
}
