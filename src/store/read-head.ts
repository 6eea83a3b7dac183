import type { ReadOutcome } from "./session-store.js";

/**
 * A session's head seq in SQL, the log's own: `max(seq)` of its events (one index seek), the same
 * text in both stores. No column holds it: a projection row is not rewritten when only its head
 * moved (`LogWriter.writeBack`, `PgWriteBatch.writtenRows`), so its `seq` may lag and no read takes it.
 */
export const headSeqOf = (sessionId: string) =>
  `coalesce((SELECT max(e.seq) FROM events e WHERE e.session_id = ${sessionId}), 0)`;

/**
 * The read reached the head it was read with (or found nothing after its cursor). A read that
 * returned fewer events than asked may have ended at its byte budget, so only this says the log
 * does not go on.
 */
export function readReachedHead(read: Extract<ReadOutcome, { status: "ok" }>): boolean {
  const last = read.events[read.events.length - 1];
  return last === undefined || last.seq >= read.headSeq;
}
