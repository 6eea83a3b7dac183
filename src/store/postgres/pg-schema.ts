import type pg from "pg";
import { refuseBesideHosts } from "./pg-upgrade-guard.js";

/**
 * Versioned schema of the PostgreSQL store. `schema_migrations` holds one row per applied entry;
 * each entry runs once, in order, in one transaction under an advisory lock, so any number of
 * hosts may open the same database at once. Never edit a shipped entry: append a new one.
 */
const MIGRATIONS: readonly string[] = [
  // 1: the log, its header (which doubles as the tombstone), the list projection, prompt keys,
  // attachments and full-text search.
  `
  -- Session ids sort and compare bytewise (COLLATE "C"), as in SQLite, so list order and cursors
  -- are the same in both stores and do not depend on the database's locale.
  -- One row per session id ever created. A deleted session keeps its row with retired_at set:
  -- the primary key alone then refuses to create the id again, on every host, for ever.
  CREATE TABLE sessions (
    session_id text COLLATE "C" PRIMARY KEY,
    owner text NOT NULL,
    epoch text NOT NULL,
    created_at bigint NOT NULL,
    fork_of_session text,
    fork_of_seq bigint,
    base_title text NOT NULL,
    base_title_explicit boolean NOT NULL,
    base_model text NOT NULL,
    acked_settled_at bigint,
    retired_at bigint
  );

  -- data holds the event's MessagePack bytes exactly as the wire writes them, so replays splice
  -- them into frames without decoding.
  CREATE TABLE events (
    session_id text COLLATE "C" NOT NULL,
    seq bigint NOT NULL CHECK (seq > 0),
    type text NOT NULL,
    at bigint NOT NULL,
    data bytea NOT NULL,
    PRIMARY KEY (session_id, seq)
  );

  -- A live session's projection row is also its head: seq is the last seq of the log. Every write
  -- to a live session locks this row (SELECT ... FOR UPDATE) and writes it back in the same
  -- transaction as the events, so writers from any host append one after the other. Free space
  -- on each page lets that rewrite be a HOT update when no indexed column changed.
  CREATE TABLE projections (
    session_id text COLLATE "C" PRIMARY KEY,
    owner text NOT NULL,
    epoch text NOT NULL,
    title text NOT NULL,
    title_explicit boolean NOT NULL,
    model text NOT NULL,
    created_at bigint NOT NULL,
    last_prompt_at bigint,
    updated_at bigint NOT NULL,
    turn_count integer NOT NULL,
    blank boolean NOT NULL,
    last_state text NOT NULL,
    message_count integer NOT NULL,
    seq bigint NOT NULL,
    open_turn_id text,
    turn_has_text boolean NOT NULL,
    has_unseen_completion boolean NOT NULL,
    completion_settled_at bigint,
    acked_settled_at bigint
  ) WITH (fillfactor = 70);
  CREATE INDEX projections_by_update ON projections (updated_at DESC, session_id);
  CREATE INDEX projections_by_owner ON projections (owner, updated_at DESC, session_id);
  CREATE INDEX projections_parked ON projections (updated_at DESC, session_id)
    WHERE last_state = 'input-required';
  CREATE INDEX projections_open_turns ON projections (session_id) WHERE open_turn_id IS NOT NULL;

  -- The unique key is what makes a retried prompt append nothing, whichever host it reaches.
  CREATE TABLE prompt_keys (
    session_id text COLLATE "C" NOT NULL,
    client_message_id text NOT NULL,
    record bytea NOT NULL,
    PRIMARY KEY (session_id, client_message_id)
  );

  CREATE TABLE attachments (
    attachment_id text PRIMARY KEY,
    owner text NOT NULL,
    session_id text COLLATE "C",
    name text NOT NULL,
    type text NOT NULL,
    size integer NOT NULL,
    bytes bytea NOT NULL,
    created_at bigint NOT NULL
  );
  CREATE INDEX attachments_by_session ON attachments (session_id) WHERE session_id IS NOT NULL;

  -- 'simple': no stemming and no stop words, like the SQLite store's unicode61 tokenizer.
  CREATE TABLE search_docs (
    id bigserial PRIMARY KEY,
    session_id text COLLATE "C" NOT NULL,
    seq bigint NOT NULL,
    text text NOT NULL,
    tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', text)) STORED
  );
  CREATE INDEX search_docs_by_session ON search_docs (session_id);
  CREATE INDEX search_docs_tsv ON search_docs USING gin (tsv);
  `,
  // 2: live state (protocol-v1 §5) as in the SQLite store: queued prompts, interactions, jobs; and
  // leases with fencing. Every write to these rows locks the session's projection row first.
  `
  CREATE TABLE queue_items (
    session_id text COLLATE "C" NOT NULL,
    item_id text NOT NULL,
    position bigint NOT NULL,
    client_message_id text,
    input bytea NOT NULL,
    bytes bigint NOT NULL,
    queued_at bigint NOT NULL,
    owner text NOT NULL,
    steered_turn text,
    PRIMARY KEY (session_id, item_id)
  );
  CREATE INDEX queue_items_by_position ON queue_items (session_id, position);
  CREATE INDEX queue_items_by_owner ON queue_items (owner);

  -- bumped by every queue change: other hosts re-read a queue only when its version moved, so each
  -- change is announced to them once
  CREATE TABLE queue_versions (
    session_id text COLLATE "C" PRIMARY KEY,
    version bigint NOT NULL
  );

  -- the primary key is what lets a fork's copied interaction/requested never make a second row
  CREATE TABLE interactions (
    interaction_id text PRIMARY KEY,
    session_id text COLLATE "C" NOT NULL,
    turn_id text NOT NULL,
    kind text NOT NULL,
    body bytea NOT NULL,
    requested_at bigint NOT NULL,
    state text NOT NULL CHECK (state IN ('pending', 'resolved', 'withdrawn')),
    resolution bytea,
    resolved_at bigint
  );
  CREATE INDEX interactions_by_turn ON interactions (session_id, turn_id);
  CREATE INDEX interactions_pending ON interactions (session_id) WHERE state = 'pending';

  CREATE TABLE jobs (
    job_id text PRIMARY KEY,
    session_id text COLLATE "C" NOT NULL,
    turn_id text NOT NULL,
    label text NOT NULL,
    progress double precision NOT NULL,
    state text NOT NULL CHECK (state IN ('running', 'completed', 'failed', 'cancelled', 'interrupted')),
    started_at bigint NOT NULL,
    ended_at bigint
  );
  CREATE INDEX jobs_running ON jobs (session_id) WHERE state = 'running';

  -- one row per session ever leased, kept on release (host_id NULL) so generation only grows;
  -- expires_at is epoch milliseconds by the database clock
  CREATE TABLE leases (
    session_id text COLLATE "C" PRIMARY KEY,
    host_id text,
    generation bigint NOT NULL,
    expires_at bigint NOT NULL
  );
  CREATE INDEX leases_held ON leases (session_id) WHERE host_id IS NOT NULL;
  `,
  // 3: calls a host forwards to the host that owns a session's agent. A row lives from `send`
  // until its sender read the reply or gave up (then deleted); rows whose sender vanished expire.
  `
  CREATE TABLE forwarded_calls (
    call_id text PRIMARY KEY,
    target_host text NOT NULL,
    from_host text NOT NULL,
    session_id text COLLATE "C" NOT NULL,
    body bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    expires_at timestamptz NOT NULL,
    claimed_at timestamptz,
    reply bytea
  );
  CREATE INDEX forwarded_calls_unclaimed ON forwarded_calls (target_host, created_at)
    WHERE claimed_at IS NULL;
  CREATE INDEX forwarded_calls_expiry ON forwarded_calls (expires_at);
  `,
  // 4: "keep running" dismissals: which principal took which session off their own list.
  `
  CREATE TABLE dismissals (
    principal text NOT NULL,
    session_id text COLLATE "C" NOT NULL,
    dismissed_at bigint NOT NULL,
    PRIMARY KEY (principal, session_id)
  );
  `,
  // 5: attachment bodies in chunks of 256 KiB, so a download streams them one query at a time
  // instead of reading a whole value per request; existing bodies are split here.
  `
  CREATE TABLE attachment_chunks (
    attachment_id text NOT NULL REFERENCES attachments (attachment_id) ON DELETE CASCADE,
    idx integer NOT NULL,
    bytes bytea NOT NULL,
    PRIMARY KEY (attachment_id, idx)
  );
  INSERT INTO attachment_chunks (attachment_id, idx, bytes)
    SELECT a.attachment_id, n.i, substring(a.bytes FROM n.i * 262144 + 1 FOR 262144)
    FROM attachments a, generate_series(0, (length(a.bytes) - 1) / 262144) AS n(i)
    WHERE length(a.bytes) > 0;
  UPDATE attachments SET bytes = '\\x' WHERE length(bytes) > 0;
  `,
  // 6: which transaction last wrote each projection row (its pg_current_xact_id, never reused), so
  // a host may keep a session's state between its transactions and have the database refuse the
  // copy, under the row lock, once any host wrote the row since; the refusal is an error of its
  // own class (SMX01) that aborts the transaction.
  `
  ALTER TABLE projections ADD COLUMN version bigint NOT NULL DEFAULT 0;
  CREATE FUNCTION sessionmux_expect(ok boolean) RETURNS void LANGUAGE plpgsql AS $$
  BEGIN
    IF ok IS NOT TRUE THEN
      RAISE EXCEPTION 'a kept session state is not the current row' USING ERRCODE = 'SMX01';
    END IF;
  END $$;
  `,
  // 7: the bytes each owner stores (its sessions' event data and its attachments), so a
  // principal's storage quota is one lookup. Events are counted by the write statement of each
  // transaction, in owner order (so two hosts take these rows' locks in one order), and out by a
  // clear or a delete; attachments, written and deleted on paths of their own, by a trigger.
  `
  CREATE TABLE owner_usage (
    owner text PRIMARY KEY,
    stored_bytes bigint NOT NULL
  );
  INSERT INTO owner_usage (owner, stored_bytes)
    SELECT owner, sum(bytes) FROM (
      SELECT s.owner, octet_length(e.data)::bigint AS bytes FROM events e JOIN sessions s USING (session_id)
      UNION ALL SELECT owner, size FROM attachments
    ) u GROUP BY owner;
  CREATE FUNCTION sessionmux_count_attachment() RETURNS trigger LANGUAGE plpgsql
    SET search_path FROM CURRENT AS $$
  BEGIN
    IF TG_OP = 'INSERT' THEN
      INSERT INTO owner_usage (owner, stored_bytes) VALUES (NEW.owner, NEW.size)
        ON CONFLICT (owner) DO UPDATE SET stored_bytes = owner_usage.stored_bytes + EXCLUDED.stored_bytes;
    ELSE
      UPDATE owner_usage SET stored_bytes = stored_bytes - OLD.size WHERE owner = OLD.owner;
    END IF;
    RETURN NULL;
  END $$;
  CREATE TRIGGER attachments_counted AFTER INSERT OR DELETE ON attachments
    FOR EACH ROW EXECUTE FUNCTION sessionmux_count_attachment();
  `,
  // 8: a session's head is its log's max(seq), no longer the projection row's seq: an append that
  // changes nothing else the row shows (a streamed delta) leaves the row alone, so a batch of a
  // hundred appends writes a hundred events and no projection. A host of an earlier build reads
  // the head from the row; it refuses to open a schema this new, and one still running sees its
  // appends refused by the log's key, never written twice.
  `
  COMMENT ON COLUMN projections.seq IS
    'the head when the row was last written, not the head: that is max(seq) of the session''s events';
  `,
  // 9: how many interactions of a session's open turn still wait for an answer, so the turn
  // stays input-required (and the session parked) until the last of a step's approvals is answered,
  // not the first. Rows are counted from the interactions, and a turn the count finds waiting is
  // input-required again: before, answering one of several left it shown as working.
  `
  ALTER TABLE projections ADD COLUMN pending_interactions integer NOT NULL DEFAULT 0;
  UPDATE projections SET pending_interactions = (
    SELECT count(*) FROM interactions i
    WHERE i.session_id = projections.session_id AND i.turn_id = projections.open_turn_id
      AND i.state = 'pending'
  ) WHERE open_turn_id IS NOT NULL;
  UPDATE projections SET last_state = 'input-required' WHERE pending_interactions > 0;
  `,
  // 10: deleting a session deletes who dismissed it, found by this index; the rows a delete of an
  // earlier build left behind go here
  `
  CREATE INDEX IF NOT EXISTS dismissals_by_session ON dismissals (session_id);
  DELETE FROM dismissals d WHERE NOT EXISTS (SELECT 1 FROM projections p WHERE p.session_id = d.session_id);
  `,
  // 11: the store's clock, by which every lease is judged, in one place: epoch milliseconds of the
  // transaction's start, cut down to the millisecond as Date.now() is (the SQLite store's clock),
  // not rounded up to the next one. A SQL function this simple is inlined into the queries that
  // call it. A test replaces it in its own schema to stop the clock at a lease's expiry.
  `
  CREATE OR REPLACE FUNCTION sessionmux_now() RETURNS bigint LANGUAGE sql STABLE
    AS $$ SELECT floor(extract(epoch FROM now()) * 1000)::bigint $$;
  `,
  // 12: a session's jobs by session, running or not (the SQLite store has had this index from the
  // start): deleting a session deletes its jobs, and with only the index of running ones that
  // statement read every job ever run, inside the deleting host's group commit, so every other
  // write of that host waited for it. Built while the table is locked against writes: jobs are
  // few rows per turn, so this is short.
  `
  CREATE INDEX IF NOT EXISTS jobs_by_session ON jobs (session_id);
  `,
  // 13: words are indexed as the SQLite store indexes them. PostgreSQL's parser reads `README.md`,
  // `/usr/lib/app.js`, `ops@example.com` or `3.14` as one token each, so a search for `md`, `lib`,
  // `example` or `14` missed them: ASCII punctuation is now read as a space before the text is parsed
  // (`translate`, unlike a regular expression class, does not depend on the database's locale). And
  // `cafe` missed `café`: accents are dropped (decomposed, combining marks U+0300–U+036F removed),
  // as `remove_diacritics` does. Rewrites the table. A text over 65,536 characters, whose words
  // could now pass what one tsvector holds (1 MiB), is split into rows of that size first, as the
  // store now writes them (see `searchChunks`).
  `
  DROP INDEX search_docs_tsv;
  ALTER TABLE search_docs DROP COLUMN tsv;
  INSERT INTO search_docs (session_id, seq, text)
    SELECT d.session_id, d.seq, substr(d.text, 1 + 65536 * k, 65536)
    FROM search_docs d, generate_series(1, (length(d.text) - 1) / 65536) k
    WHERE length(d.text) > 65536;
  UPDATE search_docs SET text = left(text, 65536) WHERE length(text) > 65536;
  ALTER TABLE search_docs ADD COLUMN tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple',
    translate(regexp_replace(normalize(text, NFD), '[\\u0300-\\u036f]', '', 'g'),
      '!"#$%&''()*+,-./:;<=>?@[\\]^_\`{|}~', '                                '))) STORED;
  CREATE INDEX search_docs_tsv ON search_docs USING gin (tsv);
  `,
  // 14: the deleted sessions by id. A host that missed notices re-reads the sessions retired
  // since (by the transaction that wrote each row, which no index can hold): this reads the
  // retired rows only, where it read every session. A row enters it once, when it is retired;
  // an ack leaves `retired_at` alone, so it stays a HOT update.
  `
  CREATE INDEX IF NOT EXISTS sessions_retired ON sessions (session_id) WHERE retired_at IS NOT NULL;
  `,
  // 15: a delete now removes the queue's version with the queue (other hosts announce the emptied
  // queue from the delete's hint, or from the sessions deleted since, after missed notices); the
  // versions earlier deletes left behind go here, so a re-read of every queue no longer announces
  // an empty queue for each session ever deleted.
  `
  DELETE FROM queue_versions v USING sessions s
    WHERE s.session_id = v.session_id AND s.retired_at IS NOT NULL;
  `,
  // 16: a clear or a delete answers without deleting the log. Each epoch's events and search rows
  // are stored under a key of its own, `projections.log_key` (null: the session id, as for every
  // log written before, so no row moves and the column costs no rewrite); a clear moves the session
  // to a fresh key and a delete removes its projection, both recording the abandoned key in
  // `purges`, whose rows any host deletes afterwards in short transactions of their own (see
  // PgPurger). A deleted session's attachments wait there too (`purges.session_id`): their bytes
  // were counted out at the delete, so the trigger leaves them alone when they go. Each projection
  // keeps its log's data bytes up to `data_bytes_seq`, moved whenever its row is written, so a
  // clear or a delete sums only the events after it; logs of before start at 0 and are summed
  // once, at their next write.
  `
  ALTER TABLE projections ADD COLUMN log_key text COLLATE "C";
  ALTER TABLE projections ADD COLUMN data_bytes bigint NOT NULL DEFAULT 0;
  ALTER TABLE projections ADD COLUMN data_bytes_seq bigint NOT NULL DEFAULT 0;
  CREATE TABLE purges (
    log_key text COLLATE "C" PRIMARY KEY,
    session_id text COLLATE "C",
    owner text NOT NULL,
    since bigint NOT NULL
  );
  CREATE INDEX purges_by_session ON purges (session_id) WHERE session_id IS NOT NULL;
  CREATE OR REPLACE FUNCTION sessionmux_count_attachment() RETURNS trigger LANGUAGE plpgsql
    SET search_path FROM CURRENT AS $$
  BEGIN
    IF TG_OP = 'INSERT' THEN
      INSERT INTO owner_usage (owner, stored_bytes) VALUES (NEW.owner, NEW.size)
        ON CONFLICT (owner) DO UPDATE SET stored_bytes = owner_usage.stored_bytes + EXCLUDED.stored_bytes;
    ELSIF NOT EXISTS (SELECT 1 FROM purges WHERE session_id = OLD.session_id) THEN
      UPDATE owner_usage SET stored_bytes = stored_bytes - OLD.size WHERE owner = OLD.owner;
    END IF;
    RETURN NULL;
  END $$;
  `,
  // 17: nor does a clear or a delete delete a session's interactions or prompt keys: a session may
  // hold hundreds of thousands, and their delete held the host's group commit for as long. An
  // interaction is stored with the key of the log it was asked in, `log_key`, and is found only
  // while its session's log is under that key: a clear leaves the old epoch's (all settled: a clear
  // is refused while a turn is open) to the purger, which finds them by that key, and a delete its
  // session's settled ones, found by session. A deleted session's prompt keys wait for it too: its
  // row, the tombstone, keeps its id from being created again. The rows stored before keep null:
  // found while their session lives, whatever its log, as they were (a clear left them), and
  // purged with its delete; no row is written here.
  `
  ALTER TABLE interactions ADD COLUMN log_key text COLLATE "C";
  CREATE INDEX interactions_by_log_key ON interactions (log_key, interaction_id) WHERE log_key IS NOT NULL;
  `,
  // 18: whether a forwarded call its owner claimed has begun there. A claim sets `started` false and
  // the owner's step that begins the call sets it true (a call put back unclaimed, null again); a
  // claimed call not begun is taken back by its sender once its owner's lease ended (it never ran
  // there, and the owner can no longer begin it), where one begun may have run. Null on a claimed
  // call: claimed by a host of a build before this column, which marks no start, so it is taken
  // for begun.
  `
  ALTER TABLE forwarded_calls ADD COLUMN IF NOT EXISTS started boolean;
  `,
  // 19: which applied entries need every host of an earlier build stopped before they run (see
  // `STOPS_EARLIER_BUILDS`), kept beside each: a running host reads the newest such entry to learn
  // that the schema moved past what its build may write (see `PgSchemaFence`), which it cannot
  // tell from the entry's number, since an entry that needs no stop leaves it writing. Never
  // dropped: every build from this one on reads it.
  `
  ALTER TABLE schema_migrations ADD COLUMN IF NOT EXISTS stops_earlier_builds boolean NOT NULL DEFAULT false;
  UPDATE schema_migrations SET stops_earlier_builds = true WHERE version IN (8, 16);
  `,
  // 20: the uploads no prompt references yet, by owner (the upload quota's sum, answered from the
  // index alone) and by age (the sweep's steps), as the SQLite store finds them. Without them each
  // upload's quota read and each sweep step read every attachment row, referenced ones (kept as
  // long as their sessions) too. A host of an earlier build runs beside them unchanged.
  `
  CREATE INDEX IF NOT EXISTS attachments_unreferenced_by_owner ON attachments (owner) INCLUDE (size)
    WHERE session_id IS NULL;
  CREATE INDEX IF NOT EXISTS attachments_unreferenced_by_age ON attachments (created_at) WHERE session_id IS NULL;
  `,
];

/**
 * The entries a host of an earlier build must not run beside: it would read or write by rules the
 * entry changed (8: the head is the log's max(seq); 16: each epoch's log under a key of its own).
 * `migrate` applies one only while no host is on the schema (see `refuseBesideHosts`). A new entry
 * that changes what a host reads or writes goes here.
 */
const STOPS_EARLIER_BUILDS: ReadonlySet<number> = new Set([8, 16]);

/** From this entry on, each row of `schema_migrations` says whether its entry stops earlier builds. */
const MARKED_FROM = 19;

export const PG_SCHEMA_VERSION = MIGRATIONS.length;

/** What `migrate` applies: this build's entries, and which of them need earlier builds stopped. */
export interface MigrationPlan {
  readonly steps: readonly string[];
  readonly stopsEarlierBuilds: ReadonlySet<number>;
}

export const THIS_BUILD: MigrationPlan = { steps: MIGRATIONS, stopsEarlierBuilds: STOPS_EARLIER_BUILDS };

const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

/** Quoted schema identifier; refuses names that would need escaping rather than escaping them. */
export function schemaIdentifier(schema: string): string {
  if (!SCHEMA_NAME.test(schema)) {
    throw new Error(`schema name "${schema}" must match ${SCHEMA_NAME.source}`);
  }
  return `"${schema}"`;
}

/** The store's tables are not in the schema: a command that only uses them found nothing to use. */
export class MissingSchemaError extends Error {
  constructor(readonly schema: string) {
    super(`schema "${schema}" holds no sessionmux tables`);
    this.name = "MissingSchemaError";
  }
}

/** Whether the schema holds the store's tables (its migrations table), without creating anything. */
export async function schemaExists(client: pg.ClientBase, schema: string): Promise<boolean> {
  const found = await client.query<{ t: string | null }>("SELECT to_regclass($1) AS t", [
    `${schemaIdentifier(schema)}.schema_migrations`,
  ]);
  return found.rows[0]?.t != null;
}

/**
 * Creates the schema if missing and brings it up to `PG_SCHEMA_VERSION`; refuses a schema written
 * by a newer build. Concurrent openers wait on one transaction-scoped advisory lock per schema.
 * An entry that needs earlier builds stopped is applied only while no host is on the schema, else
 * the whole run is refused with `EarlierBuildsLiveError` and nothing is applied. `plan` is this
 * build's, but for a test that plays a later build.
 */
export async function migrate(client: pg.ClientBase, schema: string, plan = THIS_BUILD): Promise<void> {
  const latest = plan.steps.length;
  const ident = schemaIdentifier(schema);
  await client.query("BEGIN");
  try {
    // text of every script is stored, and the search index decomposes it (`normalize`, UTF8 only)
    const encoding = await client.query<{ encoding: string }>(
      "SELECT current_setting('server_encoding') AS encoding",
    );
    const serverEncoding = encoding.rows[0]?.encoding;
    if (serverEncoding !== "UTF8") {
      throw new Error(
        `the database's encoding is ${serverEncoding}; sessionmux needs UTF8 (CREATE DATABASE … ENCODING 'UTF8' TEMPLATE template0)`,
      );
    }
    await client.query("SELECT pg_advisory_xact_lock(hashtextextended($1, 7346))", [`sessionmux:${schema}`]);
    await client.query(`CREATE SCHEMA IF NOT EXISTS ${ident}`);
    await client.query(
      `CREATE TABLE IF NOT EXISTS ${ident}.schema_migrations (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`,
    );
    const found = await client.query<{ version: number | null }>(
      `SELECT max(version) AS version FROM ${ident}.schema_migrations`,
    );
    const current = found.rows[0]?.version ?? 0;
    if (current > latest) {
      throw new Error(`database schema version ${current} is newer than this build (${latest}); upgrade`);
    }
    const stopping = [...plan.stopsEarlierBuilds].filter((version) => version > current);
    // a schema made here holds no host yet; one that lacks its table holds none either
    if (stopping.length > 0 && current > 0) await refuseBesideHosts(client, schema, Math.min(...stopping));
    await client.query(`SET LOCAL search_path TO ${ident}`);
    for (let version = current + 1; version <= latest; version++) {
      await client.query(plan.steps[version - 1]!);
      if (version < MARKED_FROM) {
        await client.query(`INSERT INTO ${ident}.schema_migrations (version) VALUES ($1)`, [version]);
      } else {
        await client.query(
          `INSERT INTO ${ident}.schema_migrations (version, stops_earlier_builds) VALUES ($1, $2)`,
          [version, plan.stopsEarlierBuilds.has(version)],
        );
      }
    }
    await client.query("COMMIT");
  } catch (err) {
    await client.query("ROLLBACK").catch(() => undefined);
    throw err;
  }
}
