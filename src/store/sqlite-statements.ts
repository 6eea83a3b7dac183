import type Database from "better-sqlite3";
import type { SearchTerm } from "./postgres/pg-search-terms.js";
import { headSeqOf } from "./read-head.js";
import { PREFIX_WORDS_SQL, registerSearchVocabulary } from "./search-prefix-words.js";
import { searchSnippet } from "./search-snippet.js";
import { EVENTS_AFTER_ENCODED, FIRST_LARGE_AFTER } from "./sqlite-event-encoding.js";

/** An insert of `rows` events in one statement (see `EventRows`). */
const insertEvents = (rows: number) =>
  `INSERT INTO events (session_id, seq, type, at, data) VALUES ${Array(rows).fill("(?, ?, ?, ?, ?)").join(", ")}`;

/** Every statement the store runs; prepared once per connection by `prepareStatements`. */
const SQL = {
  sessionState: `SELECT s.session_id, s.owner, s.epoch, s.created_at, s.fork_of_session, s.fork_of_seq,
              p.log_key, p.data_bytes, p.data_bytes_seq, ${headSeqOf("p.log_key")} AS head_seq,
              s.base_title, s.base_title_explicit, s.base_model, s.acked_settled_at AS base_acked,
              p.title, p.title_explicit, p.model, p.last_prompt_at, p.updated_at, p.turn_count, p.blank,
              p.last_state, p.message_count, p.seq, p.open_turn_id, p.turn_has_text,
              p.pending_interactions, p.has_unseen_completion, p.completion_settled_at, p.acked_settled_at
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
              pending_interactions, has_unseen_completion, completion_settled_at, acked_settled_at, log_key)
       VALUES (@sessionId, @owner, @epoch, @title, @titleExplicit, @model, @createdAt, @lastPromptAt,
              @updatedAt, @turnCount, @blank, @lastState, @messageCount, @seq, @openTurnId, @turnHasText,
              @pendingInteractions, @hasUnseenCompletion, @completionSettledAt, @ackedSettledAt, @sessionId)`,
  updateProjection: `UPDATE projections SET epoch = @epoch, title = @title, title_explicit = @titleExplicit, model = @model,
              last_prompt_at = @lastPromptAt, updated_at = @updatedAt, turn_count = @turnCount, blank = @blank,
              last_state = @lastState, message_count = @messageCount, seq = @seq, open_turn_id = @openTurnId,
              turn_has_text = @turnHasText, pending_interactions = @pendingInteractions,
              has_unseen_completion = @hasUnseenCompletion,
              completion_settled_at = @completionSettledAt, acked_settled_at = @ackedSettledAt,
              data_bytes = @dataBytes, data_bytes_seq = @dataBytesSeq
       WHERE session_id = @sessionId`,
  /** Leaves the list-order columns (updated_at, last_state) alone, so their indexes are not rewritten. */
  updateProjectionProgress: `UPDATE projections SET title = ?, title_explicit = ?, model = ?, turn_count = ?, blank = ?,
              message_count = ?, seq = ?, open_turn_id = ?, turn_has_text = ?, has_unseen_completion = ?,
              completion_settled_at = ?, acked_settled_at = ?, last_prompt_at = ?, pending_interactions = ?,
              data_bytes = ?, data_bytes_seq = ?
       WHERE session_id = ?`,
  /** Open turns not parked on a pending interaction: a restart closes these. */
  openTurns: `SELECT p.session_id FROM projections p WHERE p.open_turn_id IS NOT NULL
       AND NOT EXISTS (SELECT 1 FROM interactions i WHERE i.session_id = p.session_id
                       AND i.turn_id = p.open_turn_id AND i.state = 'pending')
       ORDER BY p.session_id`,
  allSessionIds: "SELECT session_id FROM sessions ORDER BY session_id",
  insertEvent: insertEvents(1),
  insertEvents2: insertEvents(2),
  insertEvents4: insertEvents(4),
  insertEvents8: insertEvents(8),
  insertEvents16: insertEvents(16),
  eventsAfter: "SELECT seq, at, type, data FROM events WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?",
  /** See `FIRST_LARGE_AFTER`; `EVENTS_AFTER_ENCODED` runs the same probe inside its page cut. */
  firstLargeAfter: FIRST_LARGE_AFTER,
  /** `eventsAfter` as `[seq, at, type, data]` arrays (see `RAW`). */
  eventsAfterRaw:
    "SELECT seq, at, type, hex(data) FROM events WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?",
  /** A replay array written whole by SQLite, as one blob (see `EVENTS_AFTER_ENCODED`, and `RAW`). */
  eventsAfterEncoded: EVENTS_AFTER_ENCODED,
  eventsBefore:
    "SELECT seq, at, type, data FROM events WHERE session_id = ? AND seq < ? ORDER BY seq DESC LIMIT ?",
  eventsRange:
    "SELECT seq, at, type, data FROM events WHERE session_id = ? AND seq BETWEEN ? AND ? ORDER BY seq",
  allEvents: "SELECT seq, at, type, data FROM events WHERE session_id = ? ORDER BY seq",
  lastTurnStart:
    "SELECT seq FROM events WHERE session_id = ? AND type = 'turn/start' ORDER BY seq DESC LIMIT 1",
  /** The data of a turn's prompt: the first user message after its start. */
  turnPrompt:
    "SELECT data FROM events WHERE session_id = ? AND seq > ? AND type = 'user/message' ORDER BY seq LIMIT 1",
  turnDeltas:
    "SELECT seq, data FROM events WHERE session_id = ? AND seq > ? AND type = 'assistant/delta' ORDER BY seq",
  /** A clear: the session's log goes on under a fresh key; the old one waits in `purges`. */
  moveLog: "UPDATE projections SET log_key = ?, data_bytes = 0, data_bytes_seq = 0 WHERE session_id = ?",
  insertPurge: "INSERT OR IGNORE INTO purges (log_key, session_id, owner, since) VALUES (?, ?, ?, ?)",
  deleteSession: "DELETE FROM sessions WHERE session_id = ?",
  deleteProjection: "DELETE FROM projections WHERE session_id = ?",
  ownerSessions: "SELECT count(*) AS n FROM projections WHERE owner = ?",
  ownerStoredBytes: "SELECT stored_bytes FROM owner_usage WHERE owner = ?",
  /**
   * One statement for every owner a transaction moved (a JSON array of `[owner, bytes]`, in owner
   * order): a statement per owner cost about twice as much in a batch of many owners' appends.
   */
  addOwnersStoredBytes:
    "INSERT INTO owner_usage (owner, stored_bytes) SELECT value ->> 0, value ->> 1 FROM json_each(?) WHERE true " +
    "ON CONFLICT (owner) DO UPDATE SET stored_bytes = stored_bytes + excluded.stored_bytes",
  /** The data of a log's events after `seq`: what its projection's `data_bytes` does not hold yet. */
  tailDataBytes: "SELECT coalesce(sum(length(data)), 0) FROM events WHERE session_id = ? AND seq > ?",
  /** A deleted session's attachments, counted out of its owner's usage by the delete itself. */
  sessionAttachmentBytes: "SELECT coalesce(sum(size), 0) FROM attachments WHERE session_id = ?",
  /** Each event's data size in a fork's prefix, in order: summed only as far as `ForkInput.maxDataBytes`. */
  prefixDataLengths: "SELECT length(data) FROM events WHERE session_id = ? AND seq <= ? ORDER BY seq",
  clearOwnerUsage: "DELETE FROM owner_usage",
  /** Every owner's stored bytes counted from the rows themselves (as migration 7 first did). */
  countOwnerUsage: `INSERT INTO owner_usage (owner, stored_bytes)
    SELECT owner, sum(bytes) FROM (
      SELECT p.owner AS owner, length(e.data) AS bytes FROM events e JOIN projections p ON p.log_key = e.session_id
      UNION ALL SELECT owner, size FROM attachments a
        WHERE NOT EXISTS (SELECT 1 FROM purges WHERE session_id = a.session_id)
    ) GROUP BY owner`,
  insertTombstone: "INSERT OR IGNORE INTO tombstones (session_id, deleted_at) VALUES (?, ?)",
  // a deleted session's keys wait for the purger (its id is never created again): found by no read
  findPrompt: `SELECT k.record FROM prompt_keys k WHERE k.session_id = ? AND k.client_message_id = ?
       AND EXISTS (SELECT 1 FROM projections p WHERE p.session_id = k.session_id)`,
  insertPrompt: "INSERT OR IGNORE INTO prompt_keys (session_id, client_message_id, record) VALUES (?, ?, ?)",
  linkAttachment: "UPDATE attachments SET session_id = ? WHERE attachment_id = ? AND session_id IS NULL",
  insertSearchDoc: "INSERT INTO search_docs (session_id, seq) VALUES (?, ?)",
  insertSearchText: "INSERT INTO search_fts (rowid, text) VALUES (?, ?)",
  queueNextPosition: "SELECT coalesce(max(position), 0) + 1 FROM queue_items WHERE session_id = ?",
  queueCount: "SELECT count(*) FROM queue_items WHERE session_id = ?",
  queuedBytesOfOwner: "SELECT coalesce(sum(bytes), 0) FROM queue_items WHERE owner = ?",
  insertQueueItem: `INSERT INTO queue_items (session_id, item_id, position, client_message_id, input, bytes, queued_at, owner)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
  queueItems: `SELECT item_id, session_id, owner, queued_at, input FROM queue_items
       WHERE session_id = ? ORDER BY position`,
  queueItem: `SELECT item_id, session_id, owner, queued_at, input, client_message_id FROM queue_items
       WHERE session_id = ? AND item_id = ?`,
  allQueueItems:
    "SELECT item_id, session_id, owner, queued_at, input FROM queue_items ORDER BY session_id, position",
  queueFirstPosition: "SELECT coalesce(min(position), 1) - 1 FROM queue_items WHERE session_id = ?",
  steerQueueItem:
    "UPDATE queue_items SET steered_turn = ?, position = ? WHERE session_id = ? AND item_id = ?",
  updateQueueInput: "UPDATE queue_items SET input = ?, bytes = ? WHERE session_id = ? AND item_id = ?",
  deleteQueueItem: "DELETE FROM queue_items WHERE session_id = ? AND item_id = ?",
  deleteQueue: "DELETE FROM queue_items WHERE session_id = ?",
  updatePrompt: "UPDATE prompt_keys SET record = ? WHERE session_id = ? AND client_message_id = ?",
  insertInteraction: `INSERT OR IGNORE INTO interactions (interaction_id, session_id, turn_id, kind, body, requested_at, state, log_key)
       VALUES (?, ?, ?, ?, ?, ?, 'pending', ?)`,
  // an interaction is found while its session's log is the one it was asked in: a cleared epoch's
  // and a deleted session's wait for the purger (migration 12)
  interactionRow: `SELECT i.interaction_id, i.session_id, i.turn_id, i.kind, i.body, i.requested_at, i.state,
              i.resolution, p.owner
       FROM interactions i JOIN projections p ON p.log_key = i.log_key WHERE i.interaction_id = ?`,
  turnInteractionRows: `SELECT i.interaction_id, i.session_id, i.turn_id, i.kind, i.body, i.requested_at, i.state,
              i.resolution, p.owner
       FROM interactions i JOIN projections p ON p.log_key = i.log_key
       WHERE i.session_id = ? AND i.turn_id = ? ORDER BY i.requested_at, i.interaction_id`,
  resolveInteraction: `UPDATE interactions SET state = 'resolved', resolution = ?, resolved_at = ?
       WHERE interaction_id = ? AND state = 'pending'`,
  pendingInTurn:
    "SELECT count(*) FROM interactions WHERE session_id = ? AND turn_id = ? AND state = 'pending'",
  pendingIdsOfTurn:
    "SELECT interaction_id FROM interactions WHERE session_id = ? AND turn_id = ? AND state = 'pending'",
  withdrawTurn: `UPDATE interactions SET state = 'withdrawn', resolved_at = ?
       WHERE session_id = ? AND turn_id = ? AND state = 'pending'`,
  pendingInteractionIds: "SELECT interaction_id FROM interactions WHERE session_id = ? AND state = 'pending'",
  queuedSessionsPage:
    "SELECT DISTINCT session_id FROM queue_items WHERE session_id > ? ORDER BY session_id LIMIT ?",
  parkedSessionsPage: `SELECT DISTINCT session_id FROM interactions
       WHERE state = 'pending' AND session_id > ? ORDER BY session_id LIMIT ?`,
  pendingInteractionsOfSession: `SELECT i.interaction_id, i.session_id, i.turn_id, i.kind, i.body, i.requested_at, i.state,
              i.resolution, p.owner
       FROM interactions i JOIN projections p ON p.session_id = i.session_id
       WHERE i.session_id = ? AND i.state = 'pending' ORDER BY i.requested_at, i.interaction_id`,
  liveSessionHeader: "SELECT owner, model, open_turn_id FROM projections WHERE session_id = ?",
  insertJob: `INSERT OR IGNORE INTO jobs (job_id, session_id, turn_id, label, progress, state, started_at)
       VALUES (?, ?, ?, ?, 0, 'running', ?)`,
  endJob: `UPDATE jobs SET state = ?, ended_at = ?, progress = CASE WHEN ? = 'completed' THEN 1 ELSE progress END
       WHERE job_id = ? AND session_id = ? AND state = 'running'`,
  setJobProgress: "UPDATE jobs SET progress = ? WHERE job_id = ? AND state = 'running'",
  runningJobs:
    "SELECT job_id AS jobId, session_id AS sessionId FROM jobs WHERE state = 'running' ORDER BY session_id",
  /**
   * A delete leaves a session's ended jobs to the purger: every read of jobs reads running ones.
   * The running ones of every session are few; by session, the plan read each of its ended ones.
   */
  deleteRunningJobs: "DELETE FROM jobs INDEXED BY jobs_running WHERE state = 'running' AND session_id = ?",
  runningJobsOfSession: `SELECT job_id AS jobId, session_id AS sessionId, turn_id AS turnId, label, progress,
              started_at AS startedAt FROM jobs WHERE session_id = ? AND state = 'running' ORDER BY started_at, job_id`,
  jobSessionsPage: `SELECT DISTINCT session_id FROM jobs
       WHERE state = 'running' AND session_id > ? ORDER BY session_id LIMIT ?`,
  jobSession:
    "SELECT j.session_id AS sessionId, p.owner FROM jobs j JOIN projections p USING (session_id) WHERE j.job_id = ?",
  leaseRow: "SELECT host_id AS hostId, generation, expires_at AS expiresAt FROM leases WHERE session_id = ?",
  upsertLease: `INSERT INTO leases (session_id, host_id, generation, expires_at) VALUES (?, ?, ?, ?)
       ON CONFLICT (session_id) DO UPDATE SET host_id = excluded.host_id, generation = excluded.generation,
              expires_at = excluded.expires_at`,
  renewLease: `UPDATE leases SET expires_at = ? WHERE session_id = ? AND host_id = ? AND generation = ?
       AND expires_at > ?`,
  releaseLease: "UPDATE leases SET host_id = NULL WHERE session_id = ? AND host_id = ? AND generation = ?",
  leasesPage: `SELECT l.session_id AS sessionId, l.host_id AS hostId, l.generation, l.expires_at AS expiresAt,
         s.owner FROM leases l JOIN sessions s ON s.session_id = l.session_id
       WHERE l.host_id IS NOT NULL AND l.expires_at > ? AND l.session_id > ? ORDER BY l.session_id LIMIT ?`,
  deleteLease: "DELETE FROM leases WHERE session_id = ?",
  unownedQueues: `SELECT DISTINCT q.session_id FROM queue_items q
       LEFT JOIN leases l ON l.session_id = q.session_id AND l.host_id IS NOT NULL AND l.expires_at > ?
       WHERE l.session_id IS NULL AND NOT EXISTS (SELECT 1 FROM projections p JOIN interactions i
         ON i.session_id = p.session_id AND i.turn_id = p.open_turn_id AND i.state = 'pending'
         WHERE p.session_id = q.session_id)
       ORDER BY q.session_id LIMIT ?`,
  /** A clear or a delete leaves the settled ones to the purger; pending ones are few, their turn's. */
  deletePendingInteractions: "DELETE FROM interactions WHERE session_id = ? AND state = 'pending'",
  // How many indexed words a search's prefix starts, up to the bound (see `searchPrefixTooBroad`)
  searchPrefixWords: PREFIX_WORDS_SQL,
  // Matches up to the bound (`LIMIT`), and the UTF-8 bytes of their text: a search ranks them only
  // when they are no more than it, and within the ranked text's budget (`ranksMatches`). The bytes
  // are the length FTS5's content table records for each (`octet_length` of a column reads no text).
  searchMatches: `SELECT count(*) AS matches, coalesce(sum(octet_length(c.c0)), 0) AS bytes
       FROM (SELECT search_fts.rowid AS id FROM search_fts CROSS JOIN search_docs d ON d.id = search_fts.rowid
         CROSS JOIN projections p ON p.log_key = d.session_id WHERE search_fts MATCH ? LIMIT ?) m
       CROSS JOIN search_fts_content c ON c.id = m.id`,
  // An owner's search reads the index only between its first and last indexed message (FTS5 seeks
  // to a rowid range), its sessions found by their projections (every live session has one); no
  // row: it has none, and nothing to find. The index is read first (CROSS JOIN keeps that order):
  // matching each of an owner's messages on its own runs the whole query again for each, which
  // took seconds for a prefix over a thousand messages.
  searchOwnedRange: `SELECT min((SELECT min(id) FROM search_docs WHERE session_id = p.log_key)) AS lo,
       max((SELECT max(id) FROM search_docs WHERE session_id = p.log_key)) AS hi
       FROM projections p WHERE p.owner = ?`,
  /** The owner's matches up to the bound, and their bytes: other principals' are passed over, not counted. */
  searchMatchesOwned: `SELECT count(*) AS matches, coalesce(sum(octet_length(c.c0)), 0) AS bytes
       FROM (SELECT search_fts.rowid AS id FROM search_fts CROSS JOIN search_docs d ON d.id = search_fts.rowid
         CROSS JOIN projections p ON p.log_key = d.session_id
         WHERE search_fts MATCH ? AND search_fts.rowid BETWEEN ? AND ? AND p.owner = ? LIMIT ?) m
       CROSS JOIN search_fts_content c ON c.id = m.id`,
  // search rows are stored under the log's key: one a clear or a delete left to the purger has no
  // projection, and is never found; the snippet by `search_snippet` (see `registerSearchSnippet`),
  // of the hits returned only
  search: `SELECT p.session_id AS sessionId, d.seq AS seq, search_snippet(search_fts.text, ?) AS snippet
       FROM search_fts JOIN search_docs d ON d.id = search_fts.rowid JOIN projections p ON p.log_key = d.session_id
       WHERE search_fts MATCH ? ORDER BY rank LIMIT ?`,
  // bm25() is what `rank` orders by, here computed for the owner's matches only: ordering by
  // `rank` makes FTS5 rank every match, whoever owns it, before the owner is looked at
  searchOwned: `SELECT p.session_id AS sessionId, d.seq AS seq, search_snippet(search_fts.text, ?) AS snippet
       FROM search_fts CROSS JOIN search_docs d ON d.id = search_fts.rowid
       CROSS JOIN projections p ON p.log_key = d.session_id
       WHERE search_fts MATCH ? AND search_fts.rowid BETWEEN ? AND ? AND p.owner = ?
       ORDER BY bm25(search_fts), d.id LIMIT ?`,
  // past the ranked text's budget: newest first, in the index's own order, nothing ranked
  searchNewest: `SELECT p.session_id AS sessionId, d.seq AS seq, search_snippet(search_fts.text, ?) AS snippet
       FROM search_fts CROSS JOIN search_docs d ON d.id = search_fts.rowid
       CROSS JOIN projections p ON p.log_key = d.session_id
       WHERE search_fts MATCH ? ORDER BY search_fts.rowid DESC LIMIT ?`,
  searchOwnedNewest: `SELECT p.session_id AS sessionId, d.seq AS seq, search_snippet(search_fts.text, ?) AS snippet
       FROM search_fts CROSS JOIN search_docs d ON d.id = search_fts.rowid
       CROSS JOIN projections p ON p.log_key = d.session_id
       WHERE search_fts MATCH ? AND search_fts.rowid BETWEEN ? AND ? AND p.owner = ?
       ORDER BY search_fts.rowid DESC LIMIT ?`,
} as const;

/** Statements that return their single column as a plain value. */
const PLUCKED: ReadonlySet<keyof typeof SQL> = new Set([
  "tombstone",
  "searchPrefixWords",
  "firstLargeAfter",
  "openTurns",
  "allSessionIds",
  "lastTurnStart",
  "turnPrompt",
  "findPrompt",
  "queueNextPosition",
  "queueFirstPosition",
  "queueCount",
  "queuedBytesOfOwner",
  "pendingInTurn",
  "pendingIdsOfTurn",
  "pendingInteractionIds",
  "queuedSessionsPage",
  "parkedSessionsPage",
  "jobSessionsPage",
  "unownedQueues",
  "ownerStoredBytes",
  "tailDataBytes",
  "sessionAttachmentBytes",
  "prefixDataLengths",
] as const);

/** Statements that return rows as arrays, skipping an object per row on hot paths. */
const RAW: ReadonlySet<keyof typeof SQL> = new Set(["eventsAfterRaw", "eventsAfterEncoded"] as const);

export type Statements = { readonly [K in keyof typeof SQL]: Database.Statement };

/**
 * `search_snippet(text, terms)`: `searchSnippet` of a message's text for the terms (JSON of
 * `searchTerms`), on the connection that runs the searches. FTS5's own `snippet` scores each hit
 * against every other, so its cost grows with the square of a message's hits: an answer of
 * 100,000 deltas searched for its one repeated word held the read thread for over a minute per
 * hit, and every other search of the host waited behind it.
 */
export function registerSearchSnippet(db: Database.Database): void {
  db.function("search_snippet", { deterministic: true }, (text, terms) =>
    searchSnippet(String(text), JSON.parse(String(terms)) as SearchTerm[][]),
  );
}

export function prepareStatements(db: Database.Database): Statements {
  registerSearchSnippet(db);
  registerSearchVocabulary(db);
  const prepared = {} as Record<keyof typeof SQL, Database.Statement>;
  for (const name of Object.keys(SQL) as (keyof typeof SQL)[]) {
    const statement = db.prepare(SQL[name]);
    prepared[name] = PLUCKED.has(name) ? statement.pluck() : RAW.has(name) ? statement.raw() : statement;
  }
  return prepared;
}
