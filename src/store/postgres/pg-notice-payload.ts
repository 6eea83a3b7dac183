import type { PendingNotice } from "../write-batch.js";
import type { PgLiveNotice } from "./pg-write-batch.js";

/** What one committed batch changed in one session: enough for a listener to know what to read. */
export interface ChangedSession {
  sessionId: string;
  kind: "append" | "create" | "clear" | "delete" | "meta";
  /** The epoch after the change ("" after a delete). */
  epoch: string;
  /** Seq range the batch appended in `epoch` (0, 0 when it appended nothing). */
  fromSeq: number;
  toSeq: number;
  /**
   * A `meta` change that is a principal's dismissal or restore (no row to read). On the wire a
   * sixth element `"d"`, which a host of an earlier build ignores: it reads the row and tells
   * its store-wide listeners as it did before.
   */
  dismissal?: true;
  /**
   * Whose dismissal it is and its new state: a seventh and eighth element (the name, and 1 for a
   * dismissal, 0 for a restore), which a host of an earlier build ignores. Absent when sent by one.
   */
  principal?: string;
  dismissed?: boolean;
}

/**
 * A live-state change another host re-reads: a queue at a version, an interaction (its row says
 * what happened), or a value small enough to carry (job progress, a lease change).
 */
export type LiveHint =
  | { kind: "queue"; sessionId: string; version: number }
  | { kind: "interaction"; interactionId: string }
  | { kind: "job"; sessionId: string; owner: string; jobId: string; progress: number }
  | { kind: "lease"; sessionId: string; owner: string; hostId: string | null; generation: number };

/** One NOTIFY per committed batch: the host that wrote it and what changed (or `all`: re-read). */
export interface BatchPayload {
  host: string;
  changes: ChangedSession[] | "all";
  live: LiveHint[] | "all";
}

/** The hints of a batch's live notices (an interaction once however many of its notices). */
export function hintsOf(notices: readonly PgLiveNotice[]): LiveHint[] {
  const hints: LiveHint[] = [];
  const interactions = new Set<string>();
  for (const { notice, queueVersion } of notices) {
    if (notice.kind === "queue") {
      hints.push({ kind: "queue", sessionId: notice.sessionId, version: queueVersion ?? 0 });
    } else if (notice.kind === "job.progress") {
      const { sessionId, owner, jobId, progress } = notice;
      hints.push({ kind: "job", sessionId, owner, jobId, progress });
    } else if (notice.kind === "lease") {
      const { sessionId, owner, hostId, generation } = notice;
      hints.push({ kind: "lease", sessionId, owner, hostId, generation });
    } else {
      const id =
        notice.kind === "interaction.requested" ? notice.interaction.interactionId : notice.interactionId;
      if (!interactions.has(id)) hints.push({ kind: "interaction", interactionId: id });
      interactions.add(id);
    }
  }
  return hints;
}

function encodeHint(hint: LiveHint): unknown[] {
  switch (hint.kind) {
    case "queue":
      return ["q", hint.sessionId, hint.version];
    case "interaction":
      return ["i", hint.interactionId];
    case "job":
      return ["j", hint.sessionId, hint.owner, hint.jobId, hint.progress];
    case "lease":
      return ["l", hint.sessionId, hint.owner, hint.hostId, hint.generation];
  }
}

const str = (value: unknown): value is string => typeof value === "string";
const num = (value: unknown): value is number => typeof value === "number";

function decodeHint(entry: unknown): LiveHint | null {
  if (!Array.isArray(entry)) return null;
  const [tag, a, b, c, d] = entry as unknown[];
  if (tag === "q" && str(a) && num(b)) return { kind: "queue", sessionId: a, version: b };
  if (tag === "i" && str(a)) return { kind: "interaction", interactionId: a };
  if (tag === "j" && str(a) && str(b) && str(c) && num(d))
    return { kind: "job", sessionId: a, owner: b, jobId: c, progress: d };
  if (tag === "l" && str(a) && str(b) && (str(c) || c === null) && num(d))
    return { kind: "lease", sessionId: a, owner: b, hostId: c, generation: d };
  return null;
}

/** PostgreSQL refuses payloads of 8000 bytes or more; past this a batch says only "re-read". */
const MAX_PAYLOAD = 7_000;

/** The sixth element of a `meta` change that is a dismissal (see `ChangedSession.dismissal`). */
const DISMISSAL = "d";

/** Folds a batch's notices into one change per session and kind (a batch may append twice). */
export function changesOf(notices: readonly PendingNotice[]): ChangedSession[] {
  const changes: ChangedSession[] = [];
  for (const pending of notices) {
    const { sessionId, notice } = pending;
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
      ...(notice.kind === "meta" && notice.dismissal ? { dismissal: true as const } : {}),
      ...(notice.kind === "meta" && notice.dismissal && pending.dismissal
        ? { principal: pending.dismissal.principal, dismissed: pending.dismissal.dismissed }
        : {}),
    });
  }
  return changes;
}

export function encodePayload(
  host: string,
  notices: readonly PendingNotice[],
  live: readonly PgLiveNotice[] = [],
): string {
  const changes = changesOf(notices).map((c) =>
    c.dismissal
      ? c.principal !== undefined
        ? [c.sessionId, c.kind, c.epoch, c.fromSeq, c.toSeq, DISMISSAL, c.principal, c.dismissed ? 1 : 0]
        : [c.sessionId, c.kind, c.epoch, c.fromSeq, c.toSeq, DISMISSAL]
      : [c.sessionId, c.kind, c.epoch, c.fromSeq, c.toSeq],
  );
  const text = JSON.stringify({ h: host, c: changes, l: hintsOf(live).map(encodeHint) });
  // string length bounds the UTF-8 size from below only: measure bytes
  return Buffer.byteLength(text) < MAX_PAYLOAD ? text : JSON.stringify({ h: host, c: "all", l: "all" });
}

function decodeLive(value: unknown): LiveHint[] | "all" {
  if (value === undefined) return [];
  if (!Array.isArray(value)) return "all";
  const hints: LiveHint[] = [];
  for (const entry of value) {
    const hint = decodeHint(entry);
    if (hint === null) return "all";
    hints.push(hint);
  }
  return hints;
}

/**
 * Whether `host` sent the payload, without parsing it: a host hears its own NOTIFY for every
 * batch it commits, and skips it. `encodePayload` always writes the host first.
 */
export function sentBy(text: string, host: string): boolean {
  return text.startsWith(`{"h":${JSON.stringify(host)},`);
}

const KINDS = new Set(["append", "create", "clear", "delete", "meta"]);

/** Parses a payload; anything malformed reads as "re-read everything", which is always safe. */
export function decodePayload(text: string): BatchPayload {
  try {
    const value = JSON.parse(text) as { h?: unknown; c?: unknown; l?: unknown };
    const host = typeof value.h === "string" ? value.h : "";
    const live = decodeLive(value.l);
    if (!Array.isArray(value.c)) return { host, changes: "all", live: "all" };
    const changes: ChangedSession[] = [];
    for (const entry of value.c as unknown[]) {
      if (!Array.isArray(entry)) return { host, changes: "all", live: "all" };
      const [sessionId, kind, epoch, fromSeq, toSeq, mark, principal, state] = entry as unknown[];
      if (
        typeof sessionId !== "string" ||
        typeof kind !== "string" ||
        !KINDS.has(kind) ||
        typeof epoch !== "string" ||
        typeof fromSeq !== "number" ||
        typeof toSeq !== "number"
      ) {
        return { host, changes: "all", live: "all" };
      }
      const change: ChangedSession = {
        sessionId,
        kind: kind as ChangedSession["kind"],
        epoch,
        fromSeq,
        toSeq,
      };
      if (kind === "meta" && mark === DISMISSAL) {
        change.dismissal = true;
        if (str(principal) && (state === 0 || state === 1)) {
          change.principal = principal;
          change.dismissed = state === 1;
        }
      }
      changes.push(change);
    }
    return { host, changes, live };
  } catch {
    return { host: "", changes: "all", live: "all" };
  }
}
