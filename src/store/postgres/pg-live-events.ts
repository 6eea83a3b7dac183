import type { SessionEvent } from "../../../protocol/index.js";
import { requestedInteraction } from "../live-rows.js";
import type { PgWriteBatch } from "./pg-write-batch.js";

// a fork copies its source's events: the interaction stays the source's, never a second one
const INSERT_INTERACTION = `INSERT INTO interactions (interaction_id, session_id, turn_id, kind, body, requested_at, state, log_key)
  VALUES ($1, $2, $3, $4, $5, $6, 'pending', $7) ON CONFLICT DO NOTHING RETURNING interaction_id`;
const INSERT_JOB = `INSERT INTO jobs (job_id, session_id, turn_id, label, progress, state, started_at)
  VALUES ($1, $2, $3, $4, 0, 'running', $5) ON CONFLICT DO NOTHING`;
const END_JOB = `UPDATE jobs SET state = $2, ended_at = $3, progress = CASE WHEN $2 = 'completed' THEN 1 ELSE progress END
  WHERE job_id = $1 AND session_id = $4 AND state = 'running'`;

/** The event types `afterLiveEvent` acts on; every other event skips it (and its promise). */
export const LIVE_ROW_EVENTS: ReadonlySet<string> = new Set([
  "interaction/requested",
  "job/started",
  "job/ended",
]);

/**
 * Keeps interaction and job rows in step with the events just appended, in the same transaction
 * (as the SQLite store's `LiveRows.afterEvent`): the log and the rows never disagree. A turn's
 * end withdraws its pending interactions in the writer's turn-end statement (`withdrawn`).
 */
export async function afterLiveEvent(
  batch: PgWriteBatch,
  owner: string,
  sessionId: string,
  logKey: string,
  event: SessionEvent,
): Promise<void> {
  if (event.type === "interaction/requested") {
    const { interaction, body } = requestedInteraction(sessionId, event);
    const inserted = await batch.read(INSERT_INTERACTION, [
      interaction.interactionId,
      sessionId,
      interaction.turnId,
      interaction.kind,
      Buffer.from(body),
      event.at,
      logKey,
    ]);
    if (inserted.length === 0) return;
    batch.notifyLive({ kind: "interaction.requested", owner, interaction });
  } else if (event.type === "job/started") {
    const { jobId, turnId, label } = event.data;
    await batch.execute(INSERT_JOB, [jobId, sessionId, turnId, label, event.at]);
  } else if (event.type === "job/ended") {
    // a fork's log ends the jobs it copied running: the job, the source's, is not ended by it
    await batch.execute(END_JOB, [event.data.jobId, event.data.state, event.at, sessionId]);
  }
}

/** Announces an interaction withdrawn because its turn ended without an answer. */
export function withdrawn(
  batch: PgWriteBatch,
  owner: string,
  sessionId: string,
  interactionId: string,
): void {
  batch.notifyLive({ kind: "interaction.withdrawn", owner, sessionId, interactionId });
}
