import type Database from "better-sqlite3";

/** Every statement the store runs, prepared once per connection. */
export function prepareStatements(db: Database.Database) {
  const p = (sql: string) => db.prepare(sql);
  return {
    sessionState: p(
      `SELECT s.session_id, s.owner, s.epoch, s.created_at, s.fork_of_session, s.fork_of_seq, s.head_seq,
              s.base_title, s.base_title_explicit, s.base_model, s.acked_settled_at AS base_acked,
              p.title, p.title_explicit, p.model, p.last_prompt_at, p.updated_at, p.turn_count, p.blank,
              p.last_state, p.message_count, p.seq, p.open_turn_id, p.turn_has_text,
              p.has_unseen_completion, p.completion_settled_at, p.acked_settled_at
       FROM sessions s JOIN projections p ON p.session_id = s.session_id WHERE s.session_id = ?`,
    ),
    tombstone: p("SELECT 1 FROM tombstones WHERE session_id = ?").pluck(),
    insertSession: p(
      `INSERT INTO sessions (session_id, owner, epoch, created_at, fork_of_session, fork_of_seq, head_seq,
                             base_title, base_title_explicit, base_model, acked_settled_at)
       VALUES (@sessionId, @owner, @epoch, @createdAt, @forkOfSession, @forkOfSeq, 0,
               @title, @titleExplicit, @model, NULL)`,
    ),
    updateHead: p("UPDATE sessions SET head_seq = ? WHERE session_id = ?"),
    resetEpoch: p(
      `UPDATE sessions SET epoch = @epoch, head_seq = 0, base_title = @title, base_title_explicit = @titleExplicit,
              base_model = @model, acked_settled_at = NULL WHERE session_id = @sessionId`,
    ),
    setAcked: p("UPDATE sessions SET acked_settled_at = ? WHERE session_id = ?"),
    insertProjection: p(
      `INSERT INTO projections (session_id, owner, epoch, title, title_explicit, model, created_at, last_prompt_at,
              updated_at, turn_count, blank, last_state, message_count, seq, open_turn_id, turn_has_text,
              has_unseen_completion, completion_settled_at, acked_settled_at)
       VALUES (@sessionId, @owner, @epoch, @title, @titleExplicit, @model, @createdAt, @lastPromptAt,
              @updatedAt, @turnCount, @blank, @lastState, @messageCount, @seq, @openTurnId, @turnHasText,
              @hasUnseenCompletion, @completionSettledAt, @ackedSettledAt)`,
    ),
    updateProjection: p(
      `UPDATE projections SET epoch = @epoch, title = @title, title_explicit = @titleExplicit, model = @model,
              last_prompt_at = @lastPromptAt, updated_at = @updatedAt, turn_count = @turnCount, blank = @blank,
              last_state = @lastState, message_count = @messageCount, seq = @seq, open_turn_id = @openTurnId,
              turn_has_text = @turnHasText, has_unseen_completion = @hasUnseenCompletion,
              completion_settled_at = @completionSettledAt, acked_settled_at = @ackedSettledAt
       WHERE session_id = @sessionId`,
    ),
    projectionRow: p("SELECT * FROM projections WHERE session_id = ?"),
    openTurns: p("SELECT session_id FROM projections WHERE open_turn_id IS NOT NULL ORDER BY session_id").pluck(),
    allSessionIds: p("SELECT session_id FROM sessions ORDER BY session_id").pluck(),

    insertEvent: p("INSERT INTO events (session_id, seq, type, at, data) VALUES (?, ?, ?, ?, ?)"),
    eventsAfter: p(
      "SELECT seq, at, type, data FROM events WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?",
    ),
    eventsBefore: p(
      "SELECT seq, at, type, data FROM events WHERE session_id = ? AND seq < ? ORDER BY seq DESC LIMIT ?",
    ),
    eventsRange: p(
      "SELECT seq, at, type, data FROM events WHERE session_id = ? AND seq BETWEEN ? AND ? ORDER BY seq",
    ),
    allEvents: p("SELECT seq, at, type, data FROM events WHERE session_id = ? ORDER BY seq"),
    lastTurnStart: p(
      "SELECT seq FROM events WHERE session_id = ? AND type = 'turn/start' ORDER BY seq DESC LIMIT 1",
    ).pluck(),
    turnDeltas: p(
      "SELECT seq, data FROM events WHERE session_id = ? AND seq > ? AND type = 'assistant/delta' ORDER BY seq",
    ),
    deleteEvents: p("DELETE FROM events WHERE session_id = ?"),

    deleteSession: p("DELETE FROM sessions WHERE session_id = ?"),
    deleteProjection: p("DELETE FROM projections WHERE session_id = ?"),
    insertTombstone: p("INSERT OR IGNORE INTO tombstones (session_id, deleted_at) VALUES (?, ?)"),

    findPrompt: p("SELECT record FROM prompt_keys WHERE session_id = ? AND client_message_id = ?").pluck(),
    insertPrompt: p("INSERT OR IGNORE INTO prompt_keys (session_id, client_message_id, record) VALUES (?, ?, ?)"),
    deletePrompts: p("DELETE FROM prompt_keys WHERE session_id = ?"),

    insertAttachment: p(
      `INSERT INTO attachments (attachment_id, owner, session_id, name, type, size, bytes, created_at)
       VALUES (?, ?, NULL, ?, ?, ?, ?, ?)`,
    ),
    linkAttachment: p("UPDATE attachments SET session_id = ? WHERE attachment_id = ? AND session_id IS NULL"),
    attachment: p("SELECT attachment_id, owner, session_id, name, type, size, bytes FROM attachments WHERE attachment_id = ?"),
    deleteAttachments: p("DELETE FROM attachments WHERE session_id = ?"),

    insertSearchDoc: p("INSERT INTO search_docs (session_id, seq) VALUES (?, ?)"),
    insertSearchText: p("INSERT INTO search_fts (rowid, text) VALUES (?, ?)"),
    deleteSearchText: p("DELETE FROM search_fts WHERE rowid IN (SELECT id FROM search_docs WHERE session_id = ?)"),
    deleteSearchDocs: p("DELETE FROM search_docs WHERE session_id = ?"),
    search: p(
      `SELECT d.session_id AS sessionId, d.seq AS seq, snippet(search_fts, 0, '**', '**', '…', 12) AS snippet
       FROM search_fts JOIN search_docs d ON d.id = search_fts.rowid
       WHERE search_fts MATCH ? ORDER BY rank LIMIT ?`,
    ),
    searchOwned: p(
      `SELECT d.session_id AS sessionId, d.seq AS seq, snippet(search_fts, 0, '**', '**', '…', 12) AS snippet
       FROM search_fts JOIN search_docs d ON d.id = search_fts.rowid
       JOIN sessions s ON s.session_id = d.session_id
       WHERE search_fts MATCH ? AND s.owner = ? ORDER BY rank LIMIT ?`,
    ),
  };
}

export type Statements = ReturnType<typeof prepareStatements>;
