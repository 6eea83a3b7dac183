import type Database from "better-sqlite3";

/**
 * Versioned schema. `PRAGMA user_version` holds the number of migrations applied; each entry runs
 * once, in order, inside its own transaction. Never edit a shipped entry: append a new one.
 */
const MIGRATIONS: readonly string[] = [
  // 1: the log, its header, the list projection, tombstones, prompt keys, attachments, search.
  `
  -- A session's head seq is not stored: it is max(seq) of its events (one index seek), so the
  -- head can never disagree with the log.
  CREATE TABLE sessions (
    session_id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    epoch TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    fork_of_session TEXT,
    fork_of_seq INTEGER,
    -- the header as it stood when the current epoch began: the projection folds the log from here
    base_title TEXT NOT NULL,
    base_title_explicit INTEGER NOT NULL,
    base_model TEXT NOT NULL,
    -- the newest completion an ack has covered; not an event, so rebuilds read it from here
    acked_settled_at INTEGER
  ) WITHOUT ROWID;

  CREATE TABLE events (
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    type TEXT NOT NULL,
    at INTEGER NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (session_id, seq)
  ) WITHOUT ROWID;

  CREATE TABLE projections (
    session_id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    epoch TEXT NOT NULL,
    title TEXT NOT NULL,
    title_explicit INTEGER NOT NULL,
    model TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    last_prompt_at INTEGER,
    updated_at INTEGER NOT NULL,
    turn_count INTEGER NOT NULL,
    blank INTEGER NOT NULL,
    last_state TEXT NOT NULL,
    message_count INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    open_turn_id TEXT,
    turn_has_text INTEGER NOT NULL,
    has_unseen_completion INTEGER NOT NULL,
    completion_settled_at INTEGER,
    acked_settled_at INTEGER
  ) WITHOUT ROWID;
  CREATE INDEX projections_by_update ON projections (updated_at DESC, session_id);
  CREATE INDEX projections_by_owner ON projections (owner, updated_at DESC, session_id);
  CREATE INDEX projections_by_state ON projections (last_state, updated_at DESC, session_id);

  CREATE TABLE tombstones (
    session_id TEXT PRIMARY KEY,
    deleted_at INTEGER NOT NULL
  ) WITHOUT ROWID;

  CREATE TABLE prompt_keys (
    session_id TEXT NOT NULL,
    client_message_id TEXT NOT NULL,
    record BLOB NOT NULL,
    PRIMARY KEY (session_id, client_message_id)
  ) WITHOUT ROWID;

  CREATE TABLE attachments (
    attachment_id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    session_id TEXT,
    name TEXT NOT NULL,
    type TEXT NOT NULL,
    size INTEGER NOT NULL,
    bytes BLOB NOT NULL,
    created_at INTEGER NOT NULL
  );
  CREATE INDEX attachments_by_session ON attachments (session_id) WHERE session_id IS NOT NULL;

  -- FTS5 rows are addressed by rowid; this side table maps them to sessions so a delete or a
  -- clear removes a session's rows without scanning the whole index.
  CREATE TABLE search_docs (
    id INTEGER PRIMARY KEY,
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL
  );
  CREATE INDEX search_docs_by_session ON search_docs (session_id);
  CREATE VIRTUAL TABLE search_fts USING fts5(text, tokenize = 'unicode61 remove_diacritics 2');
  `,
  // 2: live state (protocol-v1 §5): queued prompts, interactions, jobs, and which host owns a session's
  // live state. Interaction rows follow the log (`interaction/requested`, `interaction/resolved`,
  // `turn/end`) in the same transaction as those events.
  `
  CREATE TABLE queue_items (
    session_id TEXT NOT NULL,
    item_id TEXT NOT NULL,
    position INTEGER NOT NULL,
    client_message_id TEXT,
    -- the prompt input as accepted (text, display, hidden, attachments), MessagePack
    input BLOB NOT NULL,
    bytes INTEGER NOT NULL,
    queued_at INTEGER NOT NULL,
    owner TEXT NOT NULL,
    -- the turn it was steered into; it stays queued (first) until that turn's agent takes it
    steered_turn TEXT,
    PRIMARY KEY (session_id, item_id)
  ) WITHOUT ROWID;
  CREATE INDEX queue_items_by_position ON queue_items (session_id, position);
  CREATE INDEX queue_items_by_owner ON queue_items (owner);

  CREATE TABLE interactions (
    interaction_id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    turn_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    -- action / question / options / toolCallId, MessagePack
    body BLOB NOT NULL,
    requested_at INTEGER NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('pending', 'resolved', 'withdrawn')),
    resolution BLOB,
    resolved_at INTEGER
  ) WITHOUT ROWID;
  CREATE INDEX interactions_by_turn ON interactions (session_id, turn_id);
  CREATE INDEX interactions_pending ON interactions (session_id) WHERE state = 'pending';

  -- background jobs; rows follow \`job/started\` and \`job/ended\`, progress is written on its own
  CREATE TABLE jobs (
    job_id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    turn_id TEXT NOT NULL,
    label TEXT NOT NULL,
    progress REAL NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('running', 'completed', 'failed', 'cancelled', 'interrupted')),
    started_at INTEGER NOT NULL,
    ended_at INTEGER
  ) WITHOUT ROWID;
  CREATE INDEX jobs_running ON jobs (state) WHERE state = 'running';
  CREATE INDEX jobs_by_session ON jobs (session_id);

  CREATE TABLE live_owners (
    session_id TEXT PRIMARY KEY,
    host_id TEXT NOT NULL,
    generation TEXT NOT NULL,
    since INTEGER NOT NULL
  ) WITHOUT ROWID;
  `,
  // 3: leases with fencing (see session-lease.ts): one row per session ever leased, kept on release
  // (host_id NULL) so the generation only ever grows.
  `
  CREATE TABLE leases (
    session_id TEXT PRIMARY KEY,
    host_id TEXT,
    generation INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
  ) WITHOUT ROWID;
  `,
  // 4: "keep running" dismissals: which principal took which session off their own list.
  `
  CREATE TABLE dismissals (
    principal TEXT NOT NULL,
    session_id TEXT NOT NULL,
    dismissed_at INTEGER NOT NULL,
    PRIMARY KEY (principal, session_id)
  ) WITHOUT ROWID;
  `,
  // 5: attachment bodies in chunks of 256 KiB, so a download streams them one at a time instead of
  // reading a whole blob per request; existing bodies are split here. Rows stay in a rowid table:
  // each is far larger than a page. The trigger keeps every delete of an attachment row whole.
  `
  CREATE TABLE attachment_chunks (
    attachment_id TEXT NOT NULL,
    idx INTEGER NOT NULL,
    bytes BLOB NOT NULL,
    PRIMARY KEY (attachment_id, idx)
  );
  CREATE TRIGGER attachment_chunks_follow AFTER DELETE ON attachments BEGIN
    DELETE FROM attachment_chunks WHERE attachment_id = old.attachment_id;
  END;
  WITH RECURSIVE n(i) AS (
    SELECT 0 UNION ALL
    SELECT i + 1 FROM n WHERE (i + 1) * 262144 < (SELECT max(length(bytes)) FROM attachments)
  )
  INSERT INTO attachment_chunks (attachment_id, idx, bytes)
    SELECT a.attachment_id, n.i, substr(a.bytes, n.i * 262144 + 1, 262144)
    FROM attachments a JOIN n ON n.i * 262144 < length(a.bytes);
  UPDATE attachments SET bytes = x'' WHERE length(bytes) > 0;
  `,
  // 6: where a log holds events of over 2 KiB of data. A replay page of up to 500 events with none
  // of them stays under 1 MiB without measuring it; one probe of this index tells, and only pages
  // that hold such events pay for finding their cut (see sqlite-event-encoding.ts). Small events,
  // nearly all of them, never enter it.
  `
  CREATE INDEX events_large ON events (session_id, seq) WHERE length(data) > 2048;
  `,
  // 7: the bytes each owner stores (its sessions' event data and its attachments), so a
  // principal's storage quota is one lookup. Events are counted by the transactions that add or
  // remove them, once per owner per transaction (see LogWriter.writeBack); attachments, written
  // and deleted on paths of their own (uploads, the expiry sweep, a session's delete), by triggers.
  `
  CREATE TABLE owner_usage (
    owner TEXT PRIMARY KEY,
    stored_bytes INTEGER NOT NULL
  ) WITHOUT ROWID;
  INSERT INTO owner_usage (owner, stored_bytes)
    SELECT owner, sum(bytes) FROM (
      SELECT s.owner AS owner, length(e.data) AS bytes FROM events e JOIN sessions s USING (session_id)
      UNION ALL SELECT owner, size FROM attachments
    ) GROUP BY owner;
  CREATE TRIGGER attachments_counted AFTER INSERT ON attachments BEGIN
    INSERT INTO owner_usage (owner, stored_bytes) VALUES (new.owner, new.size)
      ON CONFLICT (owner) DO UPDATE SET stored_bytes = stored_bytes + excluded.stored_bytes;
  END;
  CREATE TRIGGER attachments_uncounted AFTER DELETE ON attachments BEGIN
    UPDATE owner_usage SET stored_bytes = stored_bytes - old.size WHERE owner = old.owner;
  END;
  `,
  // 8: how many interactions of a session's open turn still wait for an answer, so the turn
  // stays input-required (and the session parked) until the last of a step's approvals is answered,
  // not the first. Rows are counted from the interactions, and a turn the count finds waiting is
  // input-required again: before, answering one of several left it shown as working.
  `
  ALTER TABLE projections ADD COLUMN pending_interactions INTEGER NOT NULL DEFAULT 0;
  UPDATE projections SET pending_interactions = (
    SELECT count(*) FROM interactions i
    WHERE i.session_id = projections.session_id AND i.turn_id = projections.open_turn_id
      AND i.state = 'pending'
  ) WHERE open_turn_id IS NOT NULL;
  UPDATE projections SET last_state = 'input-required' WHERE pending_interactions > 0;
  `,
  // 9: the live state's owner rows go: nothing ever read them (a host holds the database's lock,
  // and several hosts own sessions by lease, see migration 3)
  `
  DROP TABLE IF EXISTS live_owners;
  `,
  // 10: deleting a session deletes who dismissed it, found by this index; the rows a delete of an
  // earlier build left behind go here
  `
  CREATE INDEX IF NOT EXISTS dismissals_by_session ON dismissals (session_id);
  DELETE FROM dismissals WHERE session_id NOT IN (SELECT session_id FROM projections);
  `,
  // 11: a clear or a delete answers without deleting the log. Each epoch's events (and its search
  // rows) are stored under a key of their own, `log_key` (the session id for the logs written
  // before, so no event row moves); a clear moves the session to a fresh key and records the old
  // one in `purges`, whose rows a purger deletes afterwards a bounded step at a time (see
  // SqlitePurger). A deleted session's attachments wait there too (`purges.session_id`): their
  // bytes were counted out at the delete, so the trigger leaves them alone when they go. Each
  // projection keeps its log's data bytes as of `data_bytes_seq`, so neither a clear nor a delete
  // sums the rows; here they are counted once for the logs there are.
  `
  ALTER TABLE projections ADD COLUMN log_key TEXT;
  ALTER TABLE projections ADD COLUMN data_bytes INTEGER NOT NULL DEFAULT 0;
  ALTER TABLE projections ADD COLUMN data_bytes_seq INTEGER NOT NULL DEFAULT 0;
  UPDATE projections SET log_key = session_id,
    data_bytes = (SELECT coalesce(sum(length(e.data)), 0) FROM events e WHERE e.session_id = projections.session_id),
    data_bytes_seq = (SELECT coalesce(max(e.seq), 0) FROM events e WHERE e.session_id = projections.session_id);
  CREATE UNIQUE INDEX projections_by_log_key ON projections (log_key);
  CREATE TABLE purges (
    log_key TEXT PRIMARY KEY,
    session_id TEXT,
    owner TEXT NOT NULL,
    since INTEGER NOT NULL
  ) WITHOUT ROWID;
  CREATE INDEX purges_by_session ON purges (session_id) WHERE session_id IS NOT NULL;
  DROP TRIGGER attachments_uncounted;
  CREATE TRIGGER attachments_uncounted AFTER DELETE ON attachments
    WHEN NOT EXISTS (SELECT 1 FROM purges WHERE session_id = old.session_id) BEGIN
    UPDATE owner_usage SET stored_bytes = stored_bytes - old.size WHERE owner = old.owner;
  END;
  `,
  // 12: nor does a clear or a delete delete a session's interactions or prompt keys: a session may
  // hold hundreds of thousands, and their delete held the writer (and the event loop) for seconds.
  // An interaction is stored with the key of the log it was asked in, `log_key`, and is found only
  // while its session's log is under that key; a clear leaves the old epoch's (all settled: a clear
  // is refused while a turn is open) and a delete its session's settled ones to the purger, which
  // finds them by that key. A deleted session's prompt keys wait for it too, found by
  // `purges.session_id`: its id is never created again (its tombstone). Every interaction stored
  // before belongs to its session's current log (a clear or a delete deleted them till now).
  `
  ALTER TABLE interactions ADD COLUMN log_key TEXT;
  UPDATE interactions SET log_key = (SELECT p.log_key FROM projections p WHERE p.session_id = interactions.session_id);
  CREATE INDEX interactions_by_log_key ON interactions (log_key);
  `,
  // 13: the uploads no prompt references yet, by owner (the upload quota's sum, which `size`
  // answers from the index alone) and by age (the sweep's steps). Without them each upload's quota
  // read and each sweep step read every attachment row, referenced ones too, on the event loop:
  // 27 ms and 21 ms at 200,000 rows.
  `
  CREATE INDEX IF NOT EXISTS attachments_unreferenced_by_owner ON attachments (owner, size) WHERE session_id IS NULL;
  CREATE INDEX IF NOT EXISTS attachments_unreferenced_by_age ON attachments (created_at, attachment_id) WHERE session_id IS NULL;
  `,
];

export const SCHEMA_VERSION = MIGRATIONS.length;

/** The schema version a database had when opened and the one it was left at. */
export interface SchemaMigration {
  from: number;
  to: number;
}

/** The number of migrations applied to the database (`PRAGMA user_version`). */
export function schemaVersionOf(db: Database.Database): number {
  return db.pragma("user_version", { simple: true }) as number;
}

/**
 * Brings the database up to `SCHEMA_VERSION`; refuses a database written by a newer version.
 * Returns the versions before and after, which `sessionmux migrate` reports.
 */
export function migrate(db: Database.Database): SchemaMigration {
  const version = () => schemaVersionOf(db);
  const from = version();
  if (from > SCHEMA_VERSION) {
    throw new Error(`database schema version ${from} is newer than this build (${SCHEMA_VERSION}); upgrade`);
  }
  while (version() < SCHEMA_VERSION) {
    db.transaction(() => {
      // read again under the write lock: another process may have migrated meanwhile
      const current = version();
      if (current >= SCHEMA_VERSION) return;
      db.exec(MIGRATIONS[current]!);
      db.pragma(`user_version = ${current + 1}`);
    }).immediate();
  }
  return { from, to: version() };
}
