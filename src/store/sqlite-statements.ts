import type Database from "better-sqlite3";

/** Every statement the store runs; prepared once per connection by `prepareStatements`. */
const SQL = {
  sessionState: `SELECT s.session_id, s.owner, s.epoch, s.created_at, s.fork_of_session, s.fork_of_seq,
              coalesce((SELECT max(e.seq) FROM events e WHERE e.session_id = s.session_id), 0) AS head_seq,
              s.base_title, s.base_title_explicit, s.base_model, s.acked_settled_at AS base_acked,
              p.title, p.title_explicit, p.model, p.last_prompt_at, p.updated_at, p.turn_count, p.blank,
              p.last_state, p.message_count, p.seq, p.open_turn_id, p.turn_has_text,
              p.has_unseen_completion, p.completion_settled_at, p.acked_settled_at
       FROM sessions s JOIN projections p ON p.session_id = s.session_id WHERE s.session_id = ?`,
  tombstone: "SELECT 1 FROM tombstones WHERE session_id = ?",
  insertSession: `INSERT INTO sessions (session_id, owner, epoch, created_at, fork_of_session, fork_of_seq,
                             base_title, base_title_explicit, base_model, acked_settled_at)
       VALUES (@sessionId, @owner, @epoch, @createdAt, @forkOfSession, @forkOfSeq,
               @title, @titleExplicit, @model, NULL)`,
  resetEpoch: `UPDATE sessions SET epoch = @epoch, base_title = @title, base_title_explicit = @titleExplicit,
              base_model = @model, acked_settled_at = NULL WHERE session_id = @sessionId`,
  setAcked: "UPDATE sessions SET acked_settled_at = ? WHERE session_id = ?",
  insertProjection: `INSERT INTO projections (session_id, owner, epoch, title, title_explicit, model, created_at, last_prompt_at,
              updated_at, turn_count, blank, last_state, message_count, seq, open_turn_id, turn_has_text,
              has_unseen_completion, completion_settled_at, acked_settled_at)
       VALUES (@sessionId, @owner, @epoch, @title, @titleExplicit, @model, @createdAt, @lastPromptAt,
              @updatedAt, @turnCount, @blank, @lastState, @messageCount, @seq, @openTurnId, @turnHasText,
              @hasUnseenCompletion, @completionSettledAt, @ackedSettledAt)`,
  updateProjection: `UPDATE projections SET epoch = @epoch, title = @title, title_explicit = @titleExplicit, model = @model,
              last_prompt_at = @lastPromptAt, updated_at = @updatedAt, turn_count = @turnCount, blank = @blank,
              last_state = @lastState, message_count = @messageCount, seq = @seq, open_turn_id = @openTurnId,
              turn_has_text = @turnHasText, has_unseen_completion = @hasUnseenCompletion,
              completion_settled_at = @completionSettledAt, acked_settled_at = @ackedSettledAt
       WHERE session_id = @sessionId`,
  /** Leaves the list-order columns (updated_at, last_state) alone, so their indexes are not rewritten. */
  updateProjectionProgress: `UPDATE projections SET title = ?, title_explicit = ?, model = ?, turn_count = ?, blank = ?,
              message_count = ?, seq = ?, open_turn_id = ?, turn_has_text = ?, has_unseen_completion = ?,
              completion_settled_at = ?, acked_settled_at = ?, last_prompt_at = ?
       WHERE session_id = ?`,
  openTurns: "SELECT session_id FROM projections WHERE open_turn_id IS NOT NULL ORDER BY session_id",
  allSessionIds: "SELECT session_id FROM sessions ORDER BY session_id",
  insertEvent: "INSERT INTO events (session_id, seq, type, at, data) VALUES (?, ?, ?, ?, ?)",
  eventsAfter: "SELECT seq, at, type, data FROM events WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?",
  /** `eventsAfter` as `[seq, at, type, data]` arrays (see `RAW`). */
  eventsAfterRaw:
    "SELECT seq, at, type, hex(data) FROM events WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?",
  eventsBefore:
    "SELECT seq, at, type, data FROM events WHERE session_id = ? AND seq < ? ORDER BY seq DESC LIMIT ?",
  eventsRange:
    "SELECT seq, at, type, data FROM events WHERE session_id = ? AND seq BETWEEN ? AND ? ORDER BY seq",
  allEvents: "SELECT seq, at, type, data FROM events WHERE session_id = ? ORDER BY seq",
  lastTurnStart:
    "SELECT seq FROM events WHERE session_id = ? AND type = 'turn/start' ORDER BY seq DESC LIMIT 1",
  turnDeltas:
    "SELECT seq, data FROM events WHERE session_id = ? AND seq > ? AND type = 'assistant/delta' ORDER BY seq",
  deleteEvents: "DELETE FROM events WHERE session_id = ?",
  deleteSession: "DELETE FROM sessions WHERE session_id = ?",
  deleteProjection: "DELETE FROM projections WHERE session_id = ?",
  insertTombstone: "INSERT OR IGNORE INTO tombstones (session_id, deleted_at) VALUES (?, ?)",
  findPrompt: "SELECT record FROM prompt_keys WHERE session_id = ? AND client_message_id = ?",
  insertPrompt: "INSERT OR IGNORE INTO prompt_keys (session_id, client_message_id, record) VALUES (?, ?, ?)",
  deletePrompts: "DELETE FROM prompt_keys WHERE session_id = ?",
  insertAttachment: `INSERT INTO attachments (attachment_id, owner, session_id, name, type, size, bytes, created_at)
       VALUES (?, ?, NULL, ?, ?, ?, ?, ?)`,
  linkAttachment: "UPDATE attachments SET session_id = ? WHERE attachment_id = ? AND session_id IS NULL",
  attachment:
    "SELECT attachment_id, owner, session_id, name, type, size, bytes FROM attachments WHERE attachment_id = ?",
  deleteAttachments: "DELETE FROM attachments WHERE session_id = ?",
  insertSearchDoc: "INSERT INTO search_docs (session_id, seq) VALUES (?, ?)",
  insertSearchText: "INSERT INTO search_fts (rowid, text) VALUES (?, ?)",
  deleteSearchText: "DELETE FROM search_fts WHERE rowid IN (SELECT id FROM search_docs WHERE session_id = ?)",
  deleteSearchDocs: "DELETE FROM search_docs WHERE session_id = ?",
  search: `SELECT d.session_id AS sessionId, d.seq AS seq, snippet(search_fts, 0, '**', '**', '…', 12) AS snippet
       FROM search_fts JOIN search_docs d ON d.id = search_fts.rowid
       WHERE search_fts MATCH ? ORDER BY rank LIMIT ?`,
  searchOwned: `SELECT d.session_id AS sessionId, d.seq AS seq, snippet(search_fts, 0, '**', '**', '…', 12) AS snippet
       FROM search_fts JOIN search_docs d ON d.id = search_fts.rowid
       JOIN sessions s ON s.session_id = d.session_id
       WHERE search_fts MATCH ? AND s.owner = ? ORDER BY rank LIMIT ?`,
} as const;

/** Statements that return their single column as a plain value. */
const PLUCKED: ReadonlySet<keyof typeof SQL> = new Set([
  "tombstone",
  "openTurns",
  "allSessionIds",
  "lastTurnStart",
  "findPrompt",
] as const);

/** Statements that return rows as arrays, skipping an object per row on hot paths. */
const RAW: ReadonlySet<keyof typeof SQL> = new Set(["eventsAfterRaw"] as const);

export type Statements = { readonly [K in keyof typeof SQL]: Database.Statement };

export function prepareStatements(db: Database.Database): Statements {
  const prepared = {} as Record<keyof typeof SQL, Database.Statement>;
  for (const name of Object.keys(SQL) as (keyof typeof SQL)[]) {
    const statement = db.prepare(SQL[name]);
    prepared[name] = PLUCKED.has(name) ? statement.pluck() : RAW.has(name) ? statement.raw() : statement;
  }
  return prepared;
}
