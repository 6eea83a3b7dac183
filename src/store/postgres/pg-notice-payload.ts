import type { PendingNotice } from "../write-batch.js";

/** What one committed batch changed in one session: enough for a listener to know what to read. */
export interface ChangedSession {
  sessionId: string;
  kind: "append" | "create" | "clear" | "delete" | "meta";
  /** The epoch after the change ("" after a delete). */
  epoch: string;
  /** Seq range the batch appended in `epoch` (0, 0 when it appended nothing). */
  fromSeq: number;
  toSeq: number;
}

/** One NOTIFY per committed batch: the host that wrote it and what changed (or `all`: re-read). */
export interface BatchPayload {
  host: string;
  changes: ChangedSession[] | "all";
}

/** PostgreSQL refuses payloads of 8000 bytes or more; past this a batch says only "re-read". */
const MAX_PAYLOAD = 7_000;

/** Folds a batch's notices into one change per session and kind (a batch may append twice). */
export function changesOf(notices: readonly PendingNotice[]): ChangedSession[] {
  const changes: ChangedSession[] = [];
  for (const { sessionId, notice } of notices) {
    const events = notice.kind === "append" || notice.kind === "create" ? notice.events : [];
    const epoch = notice.kind === "delete" || notice.kind === "meta" ? "" : notice.epoch;
    const last = changes[changes.length - 1];
    if (
      last &&
      last.sessionId === sessionId &&
      last.kind === "append" &&
      notice.kind === "append" &&
      last.epoch === epoch
    ) {
      last.toSeq = events[events.length - 1]?.seq ?? last.toSeq;
      continue;
    }
    changes.push({
      sessionId,
      kind: notice.kind,
      epoch,
      fromSeq: events[0]?.seq ?? 0,
      toSeq: events[events.length - 1]?.seq ?? 0,
    });
  }
  return changes;
}

export function encodePayload(host: string, notices: readonly PendingNotice[]): string {
  const changes = changesOf(notices).map((c) => [c.sessionId, c.kind, c.epoch, c.fromSeq, c.toSeq]);
  const text = JSON.stringify({ h: host, c: changes });
  // string length bounds the UTF-8 size from below only: measure bytes
  return Buffer.byteLength(text) < MAX_PAYLOAD ? text : JSON.stringify({ h: host, c: "all" });
}

const KINDS = new Set(["append", "create", "clear", "delete", "meta"]);

/** Parses a payload; anything malformed reads as "re-read everything", which is always safe. */
export function decodePayload(text: string): BatchPayload {
  try {
    const value = JSON.parse(text) as { h?: unknown; c?: unknown };
    const host = typeof value.h === "string" ? value.h : "";
    if (!Array.isArray(value.c)) return { host, changes: "all" };
    const changes: ChangedSession[] = [];
    for (const entry of value.c as unknown[]) {
      if (!Array.isArray(entry)) return { host, changes: "all" };
      const [sessionId, kind, epoch, fromSeq, toSeq] = entry as unknown[];
      if (
        typeof sessionId !== "string" ||
        typeof kind !== "string" ||
        !KINDS.has(kind) ||
        typeof epoch !== "string" ||
        typeof fromSeq !== "number" ||
        typeof toSeq !== "number"
      ) {
        return { host, changes: "all" };
      }
      changes.push({ sessionId, kind: kind as ChangedSession["kind"], epoch, fromSeq, toSeq });
    }
    return { host, changes };
  } catch {
    return { host: "", changes: "all" };
  }
}
