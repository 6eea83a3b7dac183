import type { ReadOutcome } from "./session-store.js";

/**
 * The read reached the head it was read with (or found nothing after its cursor). A read that
 * returned fewer events than asked may have ended at its byte budget, so only this says the log
 * does not go on.
 */
export function readReachedHead(read: Extract<ReadOutcome, { status: "ok" }>): boolean {
  const last = read.events[read.events.length - 1];
  return last === undefined || last.seq >= read.headSeq;
}
