import type { ReadOutcome, SessionStore } from "../../src/store/session-store.js";

/**
 * The session's events after `afterSeq` up to the head, read the way every reader of a log must:
 * a read ends at its byte budget, so reads go on until the last seq reaches the head they report.
 * The outcome has `readAfter`'s shape; a clear between two reads fails the read.
 */
export async function readWholeLog(
  store: Pick<SessionStore, "readAfter">,
  sessionId: string,
  afterSeq = 0,
): Promise<ReadOutcome> {
  const first = await store.readAfter(sessionId, afterSeq, 10_000);
  if (first.status !== "ok") return first;
  const events = [...first.events];
  let headSeq = first.headSeq;
  let dataBytes = first.dataBytes;
  for (;;) {
    const last = events.at(-1)?.seq ?? afterSeq;
    if (last >= headSeq) break;
    const next = await store.readAfter(sessionId, last, 10_000);
    if (next.status !== "ok") return next;
    if (next.epoch !== first.epoch) throw new Error(`${sessionId} was cleared while it was read`);
    if (next.events.length === 0) break;
    events.push(...next.events);
    headSeq = next.headSeq;
    dataBytes += next.dataBytes;
  }
  return { status: "ok", epoch: first.epoch, headSeq, events, dataBytes };
}
