import type { SessionRow } from "../../protocol/index.js";
import type { SessionProjection } from "../store/session-store.js";
import type { LiveState } from "./live/live-state.js";

/**
 * §4 `Row`: the stored projection plus `live` from live state. `running` is read from the
 * projection's open turn, not from the agent, so a row is one consistent cut at its `seq`: the
 * row of a `turn/end` commit never claims the turn still runs.
 */
export function toRow(projection: SessionProjection, live: LiveState): SessionRow {
  const isLive = live.isLive(projection.sessionId);
  return {
    sessionId: projection.sessionId,
    title: projection.title,
    createdAt: projection.createdAt,
    updatedAt: projection.updatedAt,
    lastPromptAt: projection.lastPromptAt,
    turnCount: projection.turnCount,
    blank: projection.blank,
    lastState: projection.lastState,
    live: isLive,
    running: isLive && projection.openTurnId !== null,
    seq: projection.seq,
  };
}
