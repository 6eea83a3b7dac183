import type { SessionRow } from "../../protocol/index.js";
import type { ControlMirror } from "../../src/client/index.js";

/**
 * What a session's agent is doing, as every part of the console says it (header, list row):
 * `waiting` while an open turn is blocked on a person's answer, `running` while a turn runs,
 * `idle` or `attached` for a live agent without a turn, `cold` without a live agent.
 *
 * The host's agent status stays `running` while its turn waits on an approval or a question, so
 * the status alone would tell a person the agent works when it waits for them.
 */
export type SessionActivity = "waiting" | "running" | "idle" | "attached" | "cold";

/** The activity of each session: from the control mirror once it has a baseline, from the row until then. */
export function activityOf(
  mirror: ControlMirror | undefined,
): (sessionId: string, row?: SessionRow) => SessionActivity {
  if (mirror === undefined || mirror.generation === undefined) {
    // no live state yet (a reload painting cached rows, a first connection): the row is all there is
    return (_sessionId, row) => {
      if (row === undefined) return "cold";
      if (row.lastState === "input-required") return "waiting";
      return row.running ? "running" : row.live ? "idle" : "cold";
    };
  }
  // pending interactions are durable: they are in the mirror even when no agent is live
  const waiting = new Set(Object.values(mirror.interactions).map((i) => i.sessionId));
  return (sessionId) => (waiting.has(sessionId) ? "waiting" : (mirror.agents[sessionId] ?? "cold"));
}

/** The header's words for an activity. */
export function activityLabel(activity: SessionActivity): string {
  return activity === "waiting" ? "waiting for your answer" : `agent ${activity}`;
}

/**
 * The row as the list draws it: its turn state made to agree with the activity, so the row and
 * the header never tell two stories (and a waiting session is pinned with the others).
 */
export function rowWithActivity(row: SessionRow, activity: SessionActivity): SessionRow {
  const waiting = activity === "waiting";
  const running = waiting || activity === "running";
  const lastState = waiting
    ? "input-required"
    : running && row.lastState === "input-required"
      ? "working"
      : row.lastState;
  return lastState === row.lastState && running === row.running ? row : { ...row, lastState, running };
}
