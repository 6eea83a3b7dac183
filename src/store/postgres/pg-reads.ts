import type pg from "pg";
import { Limits, type SessionEvent } from "../../../protocol/index.js";
import { dismissalCondition } from "../dismissals.js";
import { type EncodedRow, encodeEventArrays, readBudget } from "../encoded-event-arrays.js";
import { decodeValue } from "../event-codec.js";
import { decodeListCursor, encodeListCursor } from "../list-cursor.js";
import { decodeRow, type StoredRow } from "../log-writer.js";
import { publicProjection } from "../projection.js";
import { headSeqOf } from "../read-head.js";
import {
  headerOf,
  type ProjectionRow,
  projectionFromRow,
  type SessionStateRow,
  stateFromRow,
} from "../session-state.js";
import type {
  EncodedReadOutcome,
  HeaderOutcome,
  ListQuery,
  PageOutcome,
  PageQuery,
  PromptRecord,
  ReadOutcome,
  SessionProjection,
} from "../session-store.js";
import { textArrayLiteral } from "./pg-array-literal.js";
import { currentLogKey, logKeyOf } from "./pg-log-key.js";
import { readQuery } from "./pg-read-query.js";
import { SELECT_STATE } from "./pg-write-batch.js";

/**
 * A projections row in the shape `projectionFromRow` reads (booleans as 0/1), with the log's head
 * as `seq`.
 */
const PROJECTION_COLUMNS = `session_id, owner, epoch, created_at, title, title_explicit::int AS title_explicit, model,
  last_prompt_at, updated_at, turn_count, blank::int AS blank, last_state, message_count,
  ${headSeqOf(logKeyOf("projections"))} AS seq, open_turn_id,
  turn_has_text::int AS turn_has_text, pending_interactions, has_unseen_completion::int AS has_unseen_completion,
  completion_settled_at, acked_settled_at`;

const STATE = `${SELECT_STATE} WHERE s.session_id = $1 AND s.retired_at IS NULL`;
const RETIRED = "SELECT retired_at IS NOT NULL AS retired FROM sessions WHERE session_id = $1";
const OWNER = "SELECT owner FROM sessions WHERE session_id = $1";
const OWNER_STORED_BYTES = "SELECT stored_bytes FROM owner_usage WHERE owner = $1";
const PROJECTION = `SELECT ${PROJECTION_COLUMNS}, version FROM projections WHERE session_id = $1`;
// every write of a projection row stamps it with its transaction's 64-bit id (see migration 6);
// no index covers `version` (it would keep the row's updates from being HOT), so this scans.
// `created_since`: the log's first event is a `session/created` (a create's or a fork's; a clear
// leaves none, and the next append starts the new log with another type) that a transaction no
// older than $4 (the same transaction, as a 32-bit id) wrote: one primary-key probe per row read
const PROJECTIONS_WRITTEN_SINCE = `SELECT ${PROJECTION_COLUMNS}, version,
    EXISTS (SELECT 1 FROM events e WHERE e.session_id = ${logKeyOf("projections")} AND e.seq = 1
      AND e.type = 'session/created' AND age(e.xmin) <= age($4::xid)) AS created_since
  FROM projections WHERE version >= $1::bigint AND session_id > $2 ORDER BY session_id LIMIT $3`;
// each listed live session's newest `turn/end`, if a transaction no older than $2 (a 32-bit id)
// wrote it, other than the one that wrote its `session/created` (a fork copying its source's
// failure): one backward probe of the primary key per session, in its current log (a live
// session's key is its projection row's; the session id where that row is missing)
const LIVE_LOG_KEY = `coalesce(${currentLogKey("s.session_id")}, s.session_id)`;
export const TURN_ENDS_SINCE = `SELECT s.session_id, s.epoch, e.seq, e.at, e.type, e.data
  FROM sessions s CROSS JOIN LATERAL (
    SELECT seq, at, type, data, xmin FROM events
    WHERE session_id = ${LIVE_LOG_KEY} AND type = 'turn/end' ORDER BY seq DESC LIMIT 1
  ) e WHERE s.session_id = ANY($1::text[]) AND s.retired_at IS NULL AND age(e.xmin) <= age($2::xid)
    AND NOT EXISTS (SELECT 1 FROM events f WHERE f.session_id = ${LIVE_LOG_KEY} AND f.seq = 1
      AND f.type = 'session/created' AND f.xmin = e.xmin)`;
// a retired session's row was last written by the transaction that retired it: its `xmin`;
// migration 14's index holds the retired rows, so the live ones are never read
export const RETIRED_SINCE = `SELECT session_id FROM sessions WHERE retired_at IS NOT NULL
  AND age(xmin) <= age($1::xid) AND session_id > $2 ORDER BY session_id LIMIT $3`;
// A deleted session's dismissals wait for the purger (its id is never created again): no read
// below finds them, as if deleted with it.
const LIVE_DISMISSAL = "EXISTS (SELECT 1 FROM projections p WHERE p.session_id = d.session_id)";
// the dismissals of these principals that a transaction no older than $2 (a 32-bit id) made
const DISMISSED_SINCE = `SELECT d.principal, d.session_id FROM dismissals d
  WHERE d.principal = ANY($1::text[]) AND age(d.xmin) <= age($2::xid) AND ${LIVE_DISMISSAL}`;
// one principal's dismissals, at most $2
const DISMISSALS_OF = `SELECT d.session_id FROM dismissals d WHERE d.principal = $1 AND ${LIVE_DISMISSAL} LIMIT $2`;
// which of these (principal, session) pairs are still dismissed
const STILL_DISMISSED = `SELECT d.principal, d.session_id FROM dismissals d
  JOIN unnest($1::text[], $2::text[]) AS k(principal, session_id)
  ON d.principal = k.principal AND d.session_id = k.session_id WHERE ${LIVE_DISMISSAL}`;
/**
 * The events of one session matching `cursor`, in seq `order` from the cursor's side: at most $3,
 * and none once the data of those before them reached $4, so a read of large events stops at its
 * byte budget (see `readBudget`). `length` of a stored value reads its size, not its bytes, and
 * rows past the budget are never sent.
 */
const eventsWithinBudget = (cursor: string, order: "" | " DESC") => `SELECT seq, at, type, data FROM (
      SELECT seq, at, type, data,
        sum(length(data)) OVER (ORDER BY seq${order} ROWS UNBOUNDED PRECEDING) - length(data) AS before
      FROM events WHERE ${cursor} ORDER BY seq${order} LIMIT $3
    ) page WHERE before < $4`;
/**
 * A log read with `data` as the events' data column. The head and the events come from one
 * statement, hence one snapshot: `headSeq` is never behind the events returned, even while another
 * host commits. It stops at the byte budget $4, as a page does.
 */
const readAfterQuery = (
  data: string,
) => `SELECT s.epoch, ${headSeqOf(currentLogKey("s.session_id"))} AS head_seq,
    s.retired_at IS NOT NULL AS retired, e.seq, e.at, e.type, ${data}
  FROM sessions s LEFT JOIN LATERAL (
    ${eventsWithinBudget(`session_id = ${currentLogKey("s.session_id")} AND seq > $2`, "")}
  ) e ON true WHERE s.session_id = $1 ORDER BY e.seq`;
// $4 = `Limits.eventItemBytes`
const AFTER = readAfterQuery("e.data");
// $4 = `readBudget`; the data as hex, spliced into arrays as it is stored
const AFTER_ENCODED = readAfterQuery("encode(e.data, 'hex') AS data");
// A page stops at $4 = `Limits.eventItemBytes`.
const PAGE_AFTER = `SELECT st.*, e.seq AS e_seq, e.at AS e_at, e.type AS e_type, e.data AS e_data
  FROM (${STATE}) st LEFT JOIN LATERAL (
    ${eventsWithinBudget("session_id = st.log_key AND seq > $2", "")}
  ) e ON true ORDER BY e.seq`;
const PAGE_BEFORE = `SELECT st.*, e.seq AS e_seq, e.at AS e_at, e.type AS e_type, e.data AS e_data
  FROM (${STATE}) st LEFT JOIN LATERAL (
    ${eventsWithinBudget("session_id = st.log_key AND seq < coalesce($2, st.head_seq + 1)", " DESC")}
  ) e ON true ORDER BY e.seq`;
/**
 * One snapshot for every listed session: its epoch, its head, whether it is retired, and whether
 * the transaction that wrote its newest event is not older than $2 (a 32-bit transaction id;
 * `age` counts back from now, so the comparison holds across the counter's wraparound; null: every
 * session counts as written since).
 */
const HEADS = `SELECT s.session_id, s.epoch, coalesce(e.seq, 0) AS head_seq, s.retired_at IS NOT NULL AS retired,
    e.seq IS NOT NULL AND ($2::xid IS NULL OR age(e.xmin) <= age($2::xid)) AS written_since,
    coalesce((SELECT p.last_state = 'failed' FROM projections p WHERE p.session_id = s.session_id), false)
      AS last_failed
  FROM sessions s LEFT JOIN LATERAL (
    SELECT seq, xmin FROM events WHERE session_id = ${currentLogKey("s.session_id")} ORDER BY seq DESC LIMIT 1
  ) e ON true WHERE s.session_id = ANY($1::text[])`;
// a deleted session's keys wait for the purger (its id is never created again): found by no read
const FIND_PROMPT = `SELECT k.record FROM prompt_keys k WHERE k.session_id = $1 AND k.client_message_id = $2
  AND EXISTS (SELECT 1 FROM projections p WHERE p.session_id = k.session_id)`;

/** Where a session's log stands: what a host compares with the head it delivered. */
export interface SessionHead {
  epoch: string;
  headSeq: number;
  retired: boolean;
  /** Its newest event was written by a transaction not older than the one `heads` was given. */
  writtenSince: boolean;
  /** Its projection row says its last turn failed. */
  lastFailed: boolean;
}

type Missing = { status: "retired" } | { status: "not_found" };

/** A projection row as read, and its `version`. */
export interface VersionedProjection {
  projection: SessionProjection;
  version: number;
}

/** A projection row written since a transaction, and whether that transaction or a younger one created its session. */
export interface WrittenProjection extends VersionedProjection {
  createdSince: boolean;
}

type VersionedRow = ProjectionRow & { version: number };

const versioned = (row: VersionedRow): VersionedProjection => ({
  projection: publicProjection(projectionFromRow(row, row.seq)),
  version: row.version,
});
type AfterRow = {
  epoch: string;
  head_seq: number;
  retired: boolean;
  seq: number | null;
  at: number;
  type: string;
  data: Buffer;
};
type PageRow = SessionStateRow & { e_seq: number | null; e_at: number; e_type: string; e_data: Buffer };

/**
 * The store's reads on PostgreSQL. Every read that returns a head together with events is one
 * statement, so it is a consistent cut; nothing is cached, since other hosts write too.
 */
/** A principal's dismissal of a session. */
export interface DismissedPair {
  principal: string;
  sessionId: string;
}

export class PgReads {
  constructor(private readonly pool: pg.Pool) {}

  async header(sessionId: string): Promise<HeaderOutcome> {
    const row = (await readQuery<SessionStateRow>(this.pool, STATE, [sessionId])).rows[0];
    if (!row) return this.missing(sessionId);
    const state = stateFromRow(row);
    return { status: "ok", header: headerOf(state), headSeq: state.headSeq };
  }

  /**
   * The heads of the listed sessions that exist (retired ones included), in one statement;
   * `since`: the 32-bit id of the transaction `writtenSince` compares with.
   */
  async heads(sessionIds: readonly string[], since: string | null): Promise<Map<string, SessionHead>> {
    type Row = {
      session_id: string;
      epoch: string;
      head_seq: number;
      retired: boolean;
      written_since: boolean;
      last_failed: boolean;
    };
    const { rows } = await readQuery<Row>(this.pool, HEADS, [textArrayLiteral(sessionIds), since]);
    return new Map(
      rows.map((row) => [
        row.session_id,
        {
          epoch: row.epoch,
          headSeq: row.head_seq,
          retired: row.retired,
          writtenSince: row.written_since,
          lastFailed: row.last_failed,
        },
      ]),
    );
  }

  /**
   * The projections written by the transaction `since` (its 64-bit id `xid8`, and `xid` the same
   * as a 32-bit one) or a younger one, in session id order after `afterSessionId`, at most `limit`;
   * each says whether such a transaction created its session.
   */
  async projectionsWrittenSince(
    since: { xid: string; xid8: string },
    afterSessionId: string,
    limit: number,
  ): Promise<WrittenProjection[]> {
    const { rows } = await readQuery<VersionedRow & { created_since: boolean }>(
      this.pool,
      PROJECTIONS_WRITTEN_SINCE,
      [since.xid8, afterSessionId, limit, since.xid],
    );
    return rows.map((row) => ({ ...versioned(row), createdSince: row.created_since }));
  }

  /**
   * The newest `turn/end` of each listed live session, with its epoch, when the transaction
   * `since` (a 32-bit id) or a younger one wrote it and did not create the session, in one
   * statement.
   */
  async turnEndsSince(
    sessionIds: readonly string[],
    since: string,
  ): Promise<Map<string, { epoch: string; event: SessionEvent }>> {
    const { rows } = await readQuery<StoredRow & { session_id: string; epoch: string }>(
      this.pool,
      TURN_ENDS_SINCE,
      [textArrayLiteral(sessionIds), since],
    );
    return new Map(rows.map((row) => [row.session_id, { epoch: row.epoch, event: decodeRow(row) }]));
  }

  /** The projection with the version of its row (the 64-bit id of the transaction that wrote it). */
  async versionedProjection(sessionId: string): Promise<VersionedProjection | null> {
    const row = (await readQuery<VersionedRow>(this.pool, PROJECTION, [sessionId])).rows[0];
    return row ? versioned(row) : null;
  }

  /** The dismissals of `principals` that the transaction `since` (a 32-bit id) or a younger one made. */
  async dismissedSince(principals: readonly string[], since: string): Promise<DismissedPair[]> {
    const { rows } = await readQuery<{ principal: string; session_id: string }>(this.pool, DISMISSED_SINCE, [
      textArrayLiteral(principals),
      since,
    ]);
    return rows.map((row) => ({ principal: row.principal, sessionId: row.session_id }));
  }

  /** The sessions `principal` dismissed, at most `limit` of them. */
  async dismissalsOf(principal: string, limit: number): Promise<string[]> {
    const { rows } = await readQuery<{ session_id: string }>(this.pool, DISMISSALS_OF, [principal, limit]);
    return rows.map((row) => row.session_id);
  }

  /** Those of `pairs` still dismissed. */
  async stillDismissed(pairs: readonly DismissedPair[]): Promise<DismissedPair[]> {
    const { rows } = await readQuery<{ principal: string; session_id: string }>(this.pool, STILL_DISMISSED, [
      textArrayLiteral(pairs.map((p) => p.principal)),
      textArrayLiteral(pairs.map((p) => p.sessionId)),
    ]);
    return rows.map((row) => ({ principal: row.principal, sessionId: row.session_id }));
  }

  /**
   * The sessions retired by the transaction `since` (a 32-bit id) or a younger one, in session id
   * order after `afterSessionId`, at most `limit`.
   */
  async retiredSince(since: string, afterSessionId: string, limit: number): Promise<string[]> {
    const { rows } = await readQuery<{ session_id: string }>(this.pool, RETIRED_SINCE, [
      since,
      afterSessionId,
      limit,
    ]);
    return rows.map((row) => row.session_id);
  }

  async projection(sessionId: string): Promise<SessionProjection | null> {
    return (await this.versionedProjection(sessionId))?.projection ?? null;
  }

  /** Ascending events; no cursor = the newest `limit` (the tail). */
  async page(sessionId: string, query: PageQuery): Promise<PageOutcome> {
    const after = query.afterSeq !== undefined;
    const rows = (
      await readQuery<PageRow>(this.pool, after ? PAGE_AFTER : PAGE_BEFORE, [
        sessionId,
        after ? query.afterSeq : (query.beforeSeq ?? null),
        query.limit,
        Limits.eventItemBytes,
      ])
    ).rows;
    const first = rows[0];
    if (!first) return this.missing(sessionId);
    const state = stateFromRow(first);
    const events = rows
      .filter((row) => row.e_seq !== null)
      .map((row) => decodeRow({ seq: row.e_seq!, at: row.e_at, type: row.e_type, data: row.e_data }));
    const hasMore = after
      ? (events[events.length - 1]?.seq ?? state.headSeq) < state.headSeq
      : (events[0]?.seq ?? 1) > 1;
    return {
      status: "ok",
      header: headerOf(state),
      epoch: state.epoch,
      headSeq: state.headSeq,
      events,
      hasMore,
      projection: publicProjection(state.projection),
    };
  }

  async readAfter(sessionId: string, afterSeq: number, limit: number): Promise<ReadOutcome> {
    const rows = (
      await readQuery<AfterRow>(this.pool, AFTER, [sessionId, afterSeq, limit, Limits.eventItemBytes])
    ).rows;
    const first = rows[0];
    if (!first) return { status: "not_found" };
    if (first.retired) return { status: "retired" };
    const events: SessionEvent[] = [];
    let dataBytes = 0;
    for (const row of rows) {
      if (row.seq === null) continue;
      events.push(decodeRow(row as StoredRow));
      dataBytes += row.data.length;
    }
    return { status: "ok", epoch: first.epoch, headSeq: first.head_seq, events, dataBytes };
  }

  async readAfterEncoded(
    sessionId: string,
    afterSeq: number,
    limit: number,
    perArray: number,
    envelope?: Uint8Array,
  ): Promise<EncodedReadOutcome> {
    const rows = (
      await readQuery<Omit<AfterRow, "data"> & { data: string }>(this.pool, AFTER_ENCODED, [
        sessionId,
        afterSeq,
        limit,
        readBudget(limit, perArray),
      ])
    ).rows;
    const first = rows[0];
    if (!first) return { status: "not_found" };
    if (first.retired) return { status: "retired" };
    const encoded: EncodedRow[] = [];
    for (const row of rows) if (row.seq !== null) encoded.push([row.seq, row.at, row.type, row.data]);
    return {
      status: "ok",
      epoch: first.epoch,
      headSeq: first.head_seq,
      count: encoded.length,
      lastSeq: encoded[encoded.length - 1]?.[0] ?? afterSeq,
      arrays: encodeEventArrays(encoded, perArray, envelope),
    };
  }

  /** Newest `updatedAt` first, ties by ascending session id, keyset-paged with the shared cursor. */
  async list(query: ListQuery): Promise<{ rows: SessionProjection[]; next?: string }> {
    const after = query.before === undefined ? undefined : decodeListCursor(query.before);
    const where: string[] = [];
    const params: unknown[] = [];
    if (query.owner !== undefined) {
      params.push(query.owner);
      where.push(`owner = $${params.length}`);
    }
    if (query.dismissals) {
      params.push(query.dismissals.principal);
      where.push(dismissalCondition(query.dismissals, `$${params.length}`));
    }
    if (query.parked === true) where.push("last_state = 'input-required'");
    if (after) {
      params.push(after.updatedAt, after.sessionId);
      where.push(`updated_at <= $${params.length - 1}`);
      where.push(`(updated_at < $${params.length - 1} OR session_id > $${params.length})`);
    }
    params.push(query.limit + 1);
    const sql = `SELECT ${PROJECTION_COLUMNS} FROM projections ${where.length ? `WHERE ${where.join(" AND ")}` : ""}
      ORDER BY updated_at DESC, session_id LIMIT $${params.length}`;
    const found = (await readQuery<ProjectionRow>(this.pool, sql, params)).rows;
    const rows = found.slice(0, query.limit).map((row) => publicProjection(projectionFromRow(row, row.seq)));
    const last = rows[rows.length - 1];
    if (found.length > query.limit && last) {
      return { rows, next: encodeListCursor({ updatedAt: last.updatedAt, sessionId: last.sessionId }) };
    }
    return { rows };
  }

  /** The principal who owns (or owned: a deleted session keeps its row) `sessionId`; null for an unknown id. */
  async ownerOf(sessionId: string): Promise<string | null> {
    return (await readQuery<{ owner: string }>(this.pool, OWNER, [sessionId])).rows[0]?.owner ?? null;
  }

  async isRetired(sessionId: string): Promise<boolean> {
    return (await this.missing(sessionId)).status === "retired";
  }

  async ownerStoredBytes(owner: string): Promise<number> {
    const row = (await readQuery<{ stored_bytes: number }>(this.pool, OWNER_STORED_BYTES, [owner])).rows[0];
    return row?.stored_bytes ?? 0;
  }

  async findPrompt(sessionId: string, clientMessageId: string): Promise<PromptRecord | null> {
    const row = (await readQuery<{ record: Buffer }>(this.pool, FIND_PROMPT, [sessionId, clientMessageId]))
      .rows[0];
    return row ? decodeValue<PromptRecord>(row.record) : null;
  }

  private async missing(sessionId: string): Promise<Missing> {
    const row = (await readQuery<{ retired: boolean }>(this.pool, RETIRED, [sessionId])).rows[0];
    return row?.retired ? { status: "retired" } : { status: "not_found" };
  }
}
