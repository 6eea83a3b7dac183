import type pg from "pg";
import type { LiveStateNotice } from "../live-state-store.js";
import { publicProjection } from "../projection.js";
import { type SessionState, type SessionStateRow, stateFromRow } from "../session-state.js";
import type { CommitNotice, PromptRecord, SessionProjection } from "../session-store.js";
import type { PendingNotice } from "../write-batch.js";
import { PendingRows } from "./pg-pending-rows.js";

/** A live-state notice of this host's transaction, with what other hosts need to announce it once. */
export interface PgLiveNotice {
  notice: LiveStateNotice;
  queueVersion?: number;
}

/** The joined session + projection row in the shape `stateFromRow` reads (booleans as 0/1). */
const STATE_COLUMNS = `s.session_id, s.owner, s.epoch, s.created_at, s.fork_of_session, s.fork_of_seq, p.seq AS head_seq,
  s.base_title, s.base_title_explicit::int AS base_title_explicit, s.base_model, s.acked_settled_at AS base_acked,
  p.title, p.title_explicit::int AS title_explicit, p.model, p.last_prompt_at, p.updated_at, p.turn_count,
  p.blank::int AS blank, p.last_state, p.message_count, p.seq, p.open_turn_id, p.turn_has_text::int AS turn_has_text,
  p.has_unseen_completion::int AS has_unseen_completion, p.completion_settled_at, p.acked_settled_at`;

/** Live sessions' state; the caller adds the WHERE clause. */
export const SELECT_STATE = `SELECT ${STATE_COLUMNS} FROM sessions s JOIN projections p ON p.session_id = s.session_id`;

/** A `text[]` literal for the simple protocol, which runs several statements in one round trip. */
function textArray(client: pg.ClientBase, values: readonly string[]): string {
  return `ARRAY[${values.map((value) => client.escapeLiteral(value)).join(", ")}]::text[]`;
}

/**
 * One group-commit transaction on PostgreSQL: the session rows it holds locked (loaded once,
 * `FOR UPDATE`), the rows its operations produced (written set-wise by `PendingRows`), and the
 * notices to deliver after COMMIT. Nothing outlives the transaction:
 * the next one reads the rows again, because another host may have written in between.
 */
export class PgWriteBatch {
  readonly notices: PendingNotice[] = [];
  /** Live-state notices, delivered after the commit notices of the same transaction. */
  readonly liveNotices: PgLiveNotice[] = [];
  appendedEvents = 0;
  private readonly states = new Map<string, SessionState | "retired" | null>();
  private readonly dirty = new Map<string, SessionState>();
  private readonly created = new Set<string>();
  private readonly prompts = new Map<string, PromptRecord>();
  private readonly rows = new PendingRows();

  constructor(readonly client: pg.ClientBase) {}

  /**
   * Starts the transaction and locks and loads the listed sessions, all in one round trip: the
   * simple protocol runs BEGIN, the row locks (taken in session id order by every host, so two
   * batches never wait on each other in a cycle) and the reads in order, each read with a snapshot
   * taken after the locks were granted, so it sees what the previous holder committed.
   */
  async begin(sessionIds: readonly string[]): Promise<void> {
    await this.lockAndLoad(sessionIds, "BEGIN");
  }

  /** Locks and loads every listed session not loaded yet (one round trip). */
  async lock(sessionIds: readonly string[]): Promise<void> {
    await this.lockAndLoad(sessionIds, null);
  }

  async load(sessionId: string): Promise<SessionState | "retired" | null> {
    await this.lock([sessionId]);
    return this.states.get(sessionId) ?? null;
  }

  /** Loads again after another transaction committed a row this batch had seen as missing. */
  async reload(sessionId: string): Promise<SessionState | "retired" | null> {
    this.states.delete(sessionId);
    return this.load(sessionId);
  }

  /** A session this transaction created or retired. */
  remember(sessionId: string, state: SessionState | "retired"): void {
    this.states.set(sessionId, state);
    if (state === "retired") this.dirty.delete(sessionId);
    else {
      this.created.add(sessionId);
      this.dirty.set(sessionId, state);
    }
  }

  touch(state: SessionState): void {
    this.dirty.set(state.sessionId, state);
  }

  notify(sessionId: string, notice: CommitNotice, projection: SessionProjection | null): void {
    this.notices.push({ sessionId, notice, projection });
  }

  /** `queueVersion`: the version a queue notice announces, so other hosts announce it once. */
  notifyLive(notice: LiveStateNotice, queueVersion?: number): void {
    this.liveNotices.push(queueVersion === undefined ? { notice } : { notice, queueVersion });
  }

  snapshot(state: SessionState): SessionProjection {
    return publicProjection(state.projection);
  }

  addEvent(sessionId: string, seq: number, type: string, at: number, data: Uint8Array): void {
    this.rows.event(sessionId, seq, type, at, data);
  }

  /** A prompt key written with this transaction's events: a key another write holds aborts it. */
  addPrompt(sessionId: string, clientMessageId: string, record: PromptRecord, encoded: Uint8Array): void {
    this.prompts.set(`${sessionId}\u0000${clientMessageId}`, record);
    this.rows.prompt(sessionId, clientMessageId, encoded);
  }

  pendingPrompt(sessionId: string, clientMessageId: string): PromptRecord | undefined {
    return this.prompts.get(`${sessionId}\u0000${clientMessageId}`);
  }

  linkAttachment(sessionId: string, attachmentId: string): void {
    this.rows.link(sessionId, attachmentId);
  }

  index(sessionId: string, seq: number, text: string): void {
    this.rows.document(sessionId, seq, text);
  }

  /** Runs a read inside the transaction after writing what is pending, so it sees this batch's rows. */
  async read<R extends pg.QueryResultRow>(sql: string, params: unknown[]): Promise<R[]> {
    await this.flush();
    return (await this.client.query<R>(sql, params)).rows;
  }

  /** Runs a write inside the transaction after writing what is pending, keeping statement order. */
  async execute(sql: string, params: unknown[]): Promise<void> {
    await this.flush();
    await this.client.query(sql, params);
  }

  /** Last step inside the transaction: pending rows, heads and projections in one statement. */
  async finish(): Promise<void> {
    const statement = this.rows.take([...this.dirty.values()], this.created);
    if (statement) await this.client.query(statement.sql, statement.params);
  }

  private async flush(): Promise<void> {
    const statement = this.rows.take();
    if (statement) await this.client.query(statement.sql, statement.params);
  }

  private async lockAndLoad(sessionIds: readonly string[], begin: string | null): Promise<void> {
    const wanted = [...new Set(sessionIds)].filter((id) => !this.states.has(id));
    if (wanted.length === 0) {
      if (begin) await this.client.query(begin);
      return;
    }
    await this.flush();
    const ids = textArray(this.client, wanted);
    const statements = [
      begin,
      `SELECT 1 FROM projections WHERE session_id = ANY(${ids}) ORDER BY session_id FOR UPDATE`,
      `${SELECT_STATE} WHERE s.session_id = ANY(${ids}) AND s.retired_at IS NULL`,
      `SELECT session_id FROM sessions WHERE session_id = ANY(${ids}) AND retired_at IS NOT NULL`,
    ].filter((part) => part !== null);
    const results = (await this.client.query(statements.join(";\n"))) as unknown as pg.QueryResult[];
    const found = results[results.length - 2]!.rows as SessionStateRow[];
    const retired = new Set(
      (results[results.length - 1]!.rows as { session_id: string }[]).map((row) => row.session_id),
    );
    for (const row of found) this.states.set(row.session_id, stateFromRow(row));
    for (const id of wanted) {
      if (!this.states.has(id)) this.states.set(id, retired.has(id) ? "retired" : null);
    }
  }
}
