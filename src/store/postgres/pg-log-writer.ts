import type { SessionEvent } from "../../../protocol/index.js";
import { clearedBase, clearedLogKey, enterEpoch } from "../cleared-epoch.js";
import { decodeValue } from "../event-codec.js";
import type { TimedEvent } from "../log-writer.js";
import { initialProjection, type ProjectionBase, projectEvent } from "../projection.js";
import { newSessionState, type SessionState } from "../session-state.js";
import { storedEvent } from "../storable-data.js";
import { turnSearchDocument } from "../turn-search-document.js";
import { afterLiveEvent, LIVE_ROW_EVENTS, withdrawn } from "./pg-live-events.js";
import { storableText } from "./pg-pending-rows.js";
import { searchChunks } from "./pg-search-chunks.js";
import type { PgWriteBatch } from "./pg-write-batch.js";

const INSERT_SESSION = `INSERT INTO sessions (session_id, owner, epoch, created_at, fork_of_session, fork_of_seq,
    base_title, base_title_explicit, base_model)
  VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (session_id) DO NOTHING RETURNING session_id`;
// At a turn's end, one round trip: its pending interactions are withdrawn (rows marked `w`, see
// pg-live-events.ts) and its prompt and assistant text are read for the search index (rows marked
// `p` and `d`) from the log's key ($4).
const TURN_END = `WITH w AS (UPDATE interactions SET state = 'withdrawn', resolved_at = $3
    WHERE session_id = $1 AND turn_id = $2 AND state = 'pending' RETURNING interaction_id),
  s AS (SELECT coalesce((SELECT max(seq) FROM events WHERE session_id = $4 AND type = 'turn/start'), 0) AS seq)
  SELECT 'w' AS k, interaction_id AS id, NULL::bigint AS seq, NULL::bytea AS data FROM w
  UNION ALL (SELECT 'p', NULL, seq, data FROM events WHERE session_id = $4 AND type = 'user/message'
    AND seq > (SELECT seq FROM s) ORDER BY seq LIMIT 1)
  UNION ALL SELECT 'd', NULL, seq, data FROM events WHERE session_id = $4 AND type = 'assistant/delta'
    AND seq > (SELECT seq FROM s)
  ORDER BY seq`;
const RESET_EPOCH = `UPDATE sessions SET epoch = $2, base_title = $3, base_title_explicit = $4,
    base_model = $5, acked_settled_at = NULL WHERE session_id = $1`;
// The data bytes of the log under key $2 of session $1: the projection's count up to its
// `data_bytes_seq` and the stored sizes of the events after it (see migration 16), never a pass
// over the whole log; a session created in this transaction has no row yet, and a log of a few events.
const LOG_BYTES = `SELECT coalesce((SELECT p.data_bytes + coalesce((SELECT sum(octet_length(e.data)) FROM events e
      WHERE e.session_id = $2 AND e.seq > p.data_bytes_seq), 0) FROM projections p WHERE p.session_id = $1),
    (SELECT coalesce(sum(octet_length(e.data)), 0) FROM events e WHERE e.session_id = $2)) AS n`;
// A clear leaves the log where it is, under a key no session has any more, for the purger (see
// PgPurger), and moves the session to the fresh key $5 (the interactions asked in the log, all
// settled, stay under its key too: migration 17); it answers the log's data bytes (`n`) for
// the owner's usage. Every statement sees the rows as they were before it, so `n` is the old log's.
const ABANDON_LOG = `WITH n AS (${LOG_BYTES}),
    g AS (INSERT INTO purges (log_key, session_id, owner, since) VALUES ($2, NULL, $3, $4)),
    m AS (UPDATE projections SET log_key = $5, data_bytes = 0, data_bytes_seq = 0 WHERE session_id = $1)
  SELECT coalesce((SELECT n FROM n), 0)::bigint AS n`;
// The session row stays, with retired_at set: it is the tombstone, and it never expires. The
// queue's version goes too: the hint of the delete's emptied queue names it (see `PgLiveFeed`).
// The log under key $3, its search rows, settled interactions, prompt keys, ended jobs, dismissals
// and attachments are left to the purger, the bytes of the log and the attachments (`n`) leaving
// the owner's usage here; no read finds them from here on (pending interactions, of the open
// turn, and running jobs go now: every read of jobs reads running ones).
const RETIRE = `WITH n AS (SELECT (${LOG_BYTES.replaceAll("$2", "$3")})
      + coalesce((SELECT sum(size) FROM attachments WHERE session_id = $1), 0) AS n),
    g AS (INSERT INTO purges (log_key, session_id, owner, since) VALUES ($3, $1, $4, $2)),
    p AS (DELETE FROM projections WHERE session_id = $1),
    i AS (DELETE FROM interactions WHERE session_id = $1 AND state = 'pending'),
    j AS (DELETE FROM jobs WHERE session_id = $1 AND state = 'running'),
    l AS (DELETE FROM leases WHERE session_id = $1),
    v AS (DELETE FROM queue_versions WHERE session_id = $1)
  UPDATE sessions SET retired_at = $2 WHERE session_id = $1
  RETURNING (SELECT coalesce(n, 0)::bigint FROM n) AS n`;
const SET_ACKED = "UPDATE sessions SET acked_settled_at = $2 WHERE session_id = $1";
const ALL_EVENTS = "SELECT seq, at, type, data FROM events WHERE session_id = $1 ORDER BY seq";

/**
 * The log's write path on PostgreSQL, run only inside a group-commit transaction: the same
 * projection fold and search indexing as the SQLite store (shared pure functions),
 * with rows queued on the batch and written set-wise before COMMIT.
 */
export class PgLogWriter {
  /** Inserts the header; null when another transaction created the id first. */
  async insertSession(
    batch: PgWriteBatch,
    base: ProjectionBase,
    forkOf: SessionState["forkOf"],
  ): Promise<SessionState | null> {
    const inserted = await batch.read(INSERT_SESSION, [
      base.sessionId,
      base.owner,
      base.epoch,
      base.createdAt,
      forkOf?.sessionId ?? null,
      forkOf?.seq ?? null,
      storableText(base.title),
      base.titleExplicit,
      storableText(base.model),
    ]);
    if (inserted.length === 0) return null;
    const state = newSessionState(base, forkOf);
    batch.remember(base.sessionId, state);
    return state;
  }

  /** Appends at head+1…, indexing text and folding the projection (the host shapes user messages). */
  async appendEvents(
    batch: PgWriteBatch,
    state: SessionState,
    events: readonly TimedEvent[],
    at: number,
  ): Promise<SessionEvent[]> {
    const stored: SessionEvent[] = [];
    let dataBytes = 0;
    for (const input of events) {
      const { event, bytes } = storedEvent(state.headSeq + 1, input, at);
      dataBytes += bytes.length;
      batch.addEvent(state.sessionId, state.logKey, event.seq, event.type, event.at, bytes);
      state.headSeq = event.seq;
      state.projection = projectEvent(state.projection, event);
      // most events (a delta) have nothing to do after their insert: no promise to wait for then
      const after = this.afterInsert(batch, state, event);
      if (after) await after;
      stored.push(event);
    }
    batch.appendedEvents += stored.length;
    batch.ownerDataBytes.add(state.owner, dataBytes);
    batch.touch(state);
    return stored;
  }

  /**
   * Starts a new epoch whose projection begins from the current header, its log under a fresh key.
   * The old epoch's events and search rows stay under their key, which no session has any more, and
   * the purger deletes them afterwards (see PgPurger): the clear costs the same however long the
   * log was. Its data leaves the owner's usage here.
   */
  async resetEpoch(batch: PgWriteBatch, state: SessionState, epoch: string, at: number): Promise<void> {
    const logKey = clearedLogKey(state.sessionId, epoch);
    await this.deleteCounted(
      batch,
      ABANDON_LOG,
      [state.sessionId, state.logKey, state.owner, at, logKey],
      state.owner,
    );
    state.logKey = logKey;
    state.dataBytes = 0;
    const base = clearedBase(state, epoch);
    await batch.execute(RESET_EPOCH, [
      state.sessionId,
      epoch,
      storableText(base.title),
      base.titleExplicit,
      storableText(base.model),
    ]);
    enterEpoch(state, base);
    batch.touch(state);
  }

  /**
   * Removes the session and marks its row retired (the tombstone). Its log, search rows and
   * attachments are left to the purger (see `resetEpoch`); their bytes leave the owner's usage here.
   */
  async retire(batch: PgWriteBatch, state: SessionState, at: number): Promise<void> {
    const { sessionId, owner } = state;
    await this.deleteCounted(batch, RETIRE, [sessionId, at, state.logKey, owner], owner);
    batch.leaseWritten(sessionId);
    batch.remember(sessionId, "retired");
  }

  async setAcked(batch: PgWriteBatch, state: SessionState, ackedSettledAt: number): Promise<void> {
    await batch.execute(SET_ACKED, [state.sessionId, ackedSettledAt]);
    state.base = { ...state.base, ackedSettledAt };
    batch.touch(state);
  }

  /** Recomputes the projection from the log with the same fold the incremental path uses. */
  async rebuild(batch: PgWriteBatch, state: SessionState): Promise<void> {
    let projection = initialProjection(state.base);
    const rows = await batch.read<{ seq: number; at: number; type: string; data: Buffer }>(ALL_EVENTS, [
      state.logKey,
    ]);
    for (const row of rows) {
      projection = projectEvent(projection, {
        seq: row.seq,
        at: row.at,
        type: row.type,
        data: decodeValue(row.data),
      } as SessionEvent);
    }
    state.projection = projection;
    batch.touch(state);
  }

  /** Runs a statement that abandons a session's log; the data it held leaves the owner's usage. */
  private async deleteCounted(
    batch: PgWriteBatch,
    sql: string,
    params: unknown[],
    owner: string,
  ): Promise<void> {
    const [row] = await batch.read<{ n: number }>(sql, params);
    batch.ownerDataBytes.add(owner, -(row?.n ?? 0));
  }

  /** What an event's insert entails besides its row: `undefined` when that is nothing to wait for. */
  private afterInsert(
    batch: PgWriteBatch,
    state: SessionState,
    event: SessionEvent,
  ): Promise<void> | undefined {
    if (event.type === "user/message") {
      for (const attachment of event.data.attachments) {
        if (attachment.attachmentId) batch.linkAttachment(state.sessionId, attachment.attachmentId);
      }
      if (!event.data.hidden && !event.data.meta.incognito)
        this.index(batch, state, event.seq, event.data.text);
    } else if (event.type === "turn/end") {
      return this.endTurn(batch, state, event.data.turnId, event.at);
    }
    return LIVE_ROW_EVENTS.has(event.type)
      ? afterLiveEvent(batch, state.owner, state.sessionId, state.logKey, event)
      : undefined;
  }

  /** At `turn/end`: pending interactions are withdrawn; the assistant text is indexed at its first delta. */
  private async endTurn(batch: PgWriteBatch, state: SessionState, turnId: string, at: number): Promise<void> {
    const found = await batch.read<{ k: "w" | "p" | "d"; id: string; seq: number; data: Buffer }>(TURN_END, [
      state.sessionId,
      turnId,
      at,
      state.logKey,
    ]);
    for (const row of found) if (row.k === "w") withdrawn(batch, state.owner, state.sessionId, row.id);
    const prompt = found.find((row) => row.k === "p")?.data;
    const document = turnSearchDocument(turnId, prompt, () => found.filter((row) => row.k === "d"));
    if (document) this.index(batch, state, document.seq, document.text);
  }

  /** Search rows are stored under the log's key, so a clear leaves them to the purger with it. */
  private index(batch: PgWriteBatch, state: SessionState, seq: number, text: string): void {
    if (text.trim().length === 0) return;
    for (const chunk of searchChunks(text)) batch.index(state.logKey, seq, chunk);
  }
}
