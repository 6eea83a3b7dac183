import type pg from "pg";
import { type ProjectionState, publicProjection } from "../projection.js";
import { type SessionState, type SessionStateRow, stateFromRow } from "../session-state.js";
import type { CommitNotice, PromptRecord, SessionProjection } from "../session-store.js";
import type { PendingNotice } from "../write-batch.js";

/** The joined session + projection row in the shape `stateFromRow` reads (booleans as 0/1). */
const STATE_COLUMNS = `s.session_id, s.owner, s.epoch, s.created_at, s.fork_of_session, s.fork_of_seq, s.head_seq,
  s.base_title, s.base_title_explicit::int AS base_title_explicit, s.base_model, s.acked_settled_at AS base_acked,
  p.title, p.title_explicit::int AS title_explicit, p.model, p.last_prompt_at, p.updated_at, p.turn_count,
  p.blank::int AS blank, p.last_state, p.message_count, p.seq, p.open_turn_id, p.turn_has_text::int AS turn_has_text,
  p.has_unseen_completion::int AS has_unseen_completion, p.completion_settled_at, p.acked_settled_at`;

/** Live sessions' state; the caller adds the WHERE clause. */
export const SELECT_STATE = `SELECT ${STATE_COLUMNS} FROM sessions s JOIN projections p ON p.session_id = s.session_id`;

// Row locks are taken in session id order by every host, so two batches never wait on each other
// in a cycle. Locking both tables makes PostgreSQL re-read the newest committed versions of both
// rows once a lock it waited for is released.
const LOCK_STATES = `${SELECT_STATE} WHERE s.session_id = ANY($1) AND s.retired_at IS NULL
  ORDER BY s.session_id FOR UPDATE`;
const RETIRED = "SELECT session_id FROM sessions WHERE session_id = ANY($1) AND retired_at IS NOT NULL";

const INSERT_EVENTS = `INSERT INTO events (session_id, seq, type, at, data)
  SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::bigint[], $5::bytea[])`;
const INSERT_PROMPTS = `INSERT INTO prompt_keys (session_id, client_message_id, record)
  SELECT * FROM unnest($1::text[], $2::text[], $3::bytea[])`;
const LINK_ATTACHMENTS = `UPDATE attachments a SET session_id = v.session_id
  FROM unnest($1::text[], $2::text[]) AS v(session_id, attachment_id)
  WHERE a.attachment_id = v.attachment_id AND a.session_id IS NULL`;
const INSERT_SEARCH = `INSERT INTO search_docs (session_id, seq, text)
  SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[])`;
const WRITE_HEADS = `UPDATE sessions s SET head_seq = v.head_seq
  FROM unnest($1::text[], $2::bigint[]) AS v(session_id, head_seq) WHERE s.session_id = v.session_id`;
const PROJECTION_COLUMNS = [
  ["session_id", "text"],
  ["owner", "text"],
  ["epoch", "text"],
  ["title", "text"],
  ["title_explicit", "boolean"],
  ["model", "text"],
  ["created_at", "bigint"],
  ["last_prompt_at", "bigint"],
  ["updated_at", "bigint"],
  ["turn_count", "integer"],
  ["blank", "boolean"],
  ["last_state", "text"],
  ["message_count", "integer"],
  ["seq", "bigint"],
  ["open_turn_id", "text"],
  ["turn_has_text", "boolean"],
  ["has_unseen_completion", "boolean"],
  ["completion_settled_at", "bigint"],
  ["acked_settled_at", "bigint"],
] as const;
const UPSERT_PROJECTIONS = `INSERT INTO projections (${PROJECTION_COLUMNS.map(([name]) => name).join(", ")})
  SELECT * FROM unnest(${PROJECTION_COLUMNS.map(([, type], i) => `$${i + 1}::${type}[]`).join(", ")})
  ON CONFLICT (session_id) DO UPDATE SET ${PROJECTION_COLUMNS.slice(1)
    .map(([name]) => `${name} = EXCLUDED.${name}`)
    .join(", ")}`;

/** PostgreSQL text cannot hold U+0000; free text (titles, search text) drops it. */
export function storableText(text: string): string {
  return text.includes("\u0000") ? text.replaceAll("\u0000", "") : text;
}

function projectionColumns(rows: readonly ProjectionState[]): unknown[][] {
  return [
    rows.map((r) => r.sessionId),
    rows.map((r) => r.owner),
    rows.map((r) => r.epoch),
    rows.map((r) => storableText(r.title)),
    rows.map((r) => r.titleExplicit),
    rows.map((r) => storableText(r.model)),
    rows.map((r) => r.createdAt),
    rows.map((r) => r.lastPromptAt),
    rows.map((r) => r.updatedAt),
    rows.map((r) => r.turnCount),
    rows.map((r) => r.blank),
    rows.map((r) => r.lastState),
    rows.map((r) => r.messageCount),
    rows.map((r) => r.seq),
    rows.map((r) => r.openTurnId),
    rows.map((r) => r.turnHasText),
    rows.map((r) => r.hasUnseenCompletion),
    rows.map((r) => r.completionSettledAt),
    rows.map((r) => r.ackedSettledAt),
  ];
}

/**
 * One group-commit transaction on PostgreSQL: the session rows it holds locked (loaded once,
 * `FOR UPDATE`), the rows its operations produced, written set-wise (one statement per table,
 * not one per event), and the notices to deliver after COMMIT. Nothing outlives the transaction:
 * the next one reads the rows again, because another host may have written in between.
 */
export class PgWriteBatch {
  readonly notices: PendingNotice[] = [];
  appendedEvents = 0;
  private readonly states = new Map<string, SessionState | "retired" | null>();
  private readonly dirty = new Map<string, SessionState>();
  private readonly prompts = new Map<string, PromptRecord>();
  private events: [string[], number[], string[], number[], Buffer[]] = [[], [], [], [], []];
  private promptRows: [string[], string[], Buffer[]] = [[], [], []];
  private links: [string[], string[]] = [[], []];
  private searchRows: [string[], number[], string[]] = [[], [], []];

  constructor(readonly client: pg.ClientBase) {}

  /** Locks and loads every listed session not loaded yet, in one round trip (two if one is missing). */
  async lock(sessionIds: readonly string[]): Promise<void> {
    const wanted = [...new Set(sessionIds)].filter((id) => !this.states.has(id));
    if (wanted.length === 0) return;
    const found = await this.client.query<SessionStateRow>(LOCK_STATES, [wanted]);
    for (const row of found.rows) this.states.set(row.session_id, stateFromRow(row));
    const missing = wanted.filter((id) => !this.states.has(id));
    if (missing.length === 0) return;
    const retired = await this.client.query<{ session_id: string }>(RETIRED, [missing]);
    const gone = new Set(retired.rows.map((row) => row.session_id));
    for (const id of missing) this.states.set(id, gone.has(id) ? "retired" : null);
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
    else this.dirty.set(sessionId, state);
  }

  touch(state: SessionState): void {
    this.dirty.set(state.sessionId, state);
  }

  notify(sessionId: string, notice: CommitNotice, projection: SessionProjection | null): void {
    this.notices.push({ sessionId, notice, projection });
  }

  snapshot(state: SessionState): SessionProjection {
    return publicProjection(state.projection);
  }

  addEvent(sessionId: string, seq: number, type: string, at: number, data: Uint8Array): void {
    const [ids, seqs, types, ats, datas] = this.events;
    ids.push(sessionId);
    seqs.push(seq);
    types.push(type);
    ats.push(at);
    datas.push(Buffer.from(data.buffer, data.byteOffset, data.byteLength));
  }

  /** A prompt key written with this transaction's events: a key another write holds aborts it. */
  addPrompt(sessionId: string, clientMessageId: string, record: PromptRecord, encoded: Uint8Array): void {
    this.prompts.set(`${sessionId}\u0000${clientMessageId}`, record);
    this.promptRows[0].push(sessionId);
    this.promptRows[1].push(clientMessageId);
    this.promptRows[2].push(Buffer.from(encoded));
  }

  pendingPrompt(sessionId: string, clientMessageId: string): PromptRecord | undefined {
    return this.prompts.get(`${sessionId}\u0000${clientMessageId}`);
  }

  linkAttachment(sessionId: string, attachmentId: string): void {
    this.links[0].push(sessionId);
    this.links[1].push(attachmentId);
  }

  index(sessionId: string, seq: number, text: string): void {
    this.searchRows[0].push(sessionId);
    this.searchRows[1].push(seq);
    this.searchRows[2].push(storableText(text));
  }

  /** Runs a read inside the transaction after writing what is pending, so it sees this batch's rows. */
  async read<R extends pg.QueryResultRow>(sql: string, params: unknown[]): Promise<R[]> {
    await this.flushRows();
    return (await this.client.query<R>(sql, params)).rows;
  }

  /** Runs a write inside the transaction after writing what is pending, keeping statement order. */
  async execute(sql: string, params: unknown[]): Promise<void> {
    await this.flushRows();
    await this.client.query(sql, params);
  }

  /** Last step inside the transaction: pending rows, then heads and projections of touched sessions. */
  async finish(): Promise<void> {
    await this.flushRows();
    const states = [...this.dirty.values()];
    if (states.length === 0) return;
    await this.client.query(WRITE_HEADS, [states.map((s) => s.sessionId), states.map((s) => s.headSeq)]);
    await this.client.query(UPSERT_PROJECTIONS, projectionColumns(states.map((s) => s.projection)));
  }

  private async flushRows(): Promise<void> {
    if (this.events[0].length > 0) {
      await this.client.query(INSERT_EVENTS, this.events);
      this.events = [[], [], [], [], []];
    }
    if (this.promptRows[0].length > 0) {
      await this.client.query(INSERT_PROMPTS, this.promptRows);
      this.promptRows = [[], [], []];
    }
    if (this.links[0].length > 0) {
      await this.client.query(LINK_ATTACHMENTS, this.links);
      this.links = [[], []];
    }
    if (this.searchRows[0].length > 0) {
      await this.client.query(INSERT_SEARCH, this.searchRows);
      this.searchRows = [[], [], []];
    }
  }
}
