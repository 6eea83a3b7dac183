import { readReachedHead } from "../../src/store/read-head.js";
import type { ReadOutcome, SessionStore } from "../../src/store/session-store.js";

/**
 * The session's events after `afterSeq` up to the head, read the way every reader of a log must:
 * a read ends at its byte budget, so reads go on until one reaches the head it reports.
 * The outcome has `readAfter`'s shape; a clear between two reads fails the read.
 */
export async function readWholeLog(
  store: Pick<SessionStore, "readAfter">,
  sessionId: string,
  afterSeq = 0,
): Promise<ReadOutcome> {
  let read = await store.readAfter(sessionId, afterSeq, 10_000);
  if (read.status !== "ok") return read;
  const { epoch } = read;
  const events = [...read.events];
  let dataBytes = read.dataBytes;
  while (!readReachedHead(read)) {
    read = await store.readAfter(sessionId, read.events[read.events.length - 1]!.seq, 10_000);
    if (read.status !== "ok") return read;
    if (read.epoch !== epoch) throw new Error(`${sessionId} was cleared while it was read`);
    events.push(...read.events);
    dataBytes += read.dataBytes;
  }
  return { status: "ok", epoch, headSeq: read.headSeq, events, dataBytes };
}
