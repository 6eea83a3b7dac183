import type { SessionRow } from "../../protocol/index.js";
import type { SessionProjection } from "../store/session-store.js";
import type { LiveState } from "./live/live-state.js";

/** §4 `Row`: the stored projection plus `live`/`running` from live state. */
export function toRow(projection: SessionProjection, live: LiveState): SessionRow {
  return {
    sessionId: projection.sessionId,
    title: projection.title,
    createdAt: projection.createdAt,
    updatedAt: projection.updatedAt,
    lastPromptAt: projection.lastPromptAt,
    turnCount: projection.turnCount,
    blank: projection.blank,
    lastState: projection.lastState,
    live: live.isLive(projection.sessionId),
    running: live.isRunning(projection.sessionId),
    seq: projection.seq,
  };
}
