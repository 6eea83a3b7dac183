import type pg from "pg";
import type { LeaseRow } from "../lease-rules.js";
import type { LiveStateNotice } from "../live-state-store.js";
import { OwnerDataBytes } from "../owner-data-bytes.js";
import { onlySeqMoved, type ProjectionState, publicProjection } from "../projection.js";
import { headSeqOf } from "../read-head.js";
import type { SessionLease } from "../session-lease.js";
import { type SessionState, type SessionStateRow, stateFromRow } from "../session-state.js";
import type { CommitNotice, PromptRecord, SessionProjection } from "../session-store.js";
import type { PendingNotice } from "../write-batch.js";
import { integerArrayLiteral, textArrayLiteral } from "./pg-array-literal.js";
import { othersPresent } from "./pg-host-presence.js";
import { DB_NOW } from "./pg-live-rows.js";
import { logKeyOf } from "./pg-log-key.js";
import { type CommitRows, PendingRows } from "./pg-pending-rows.js";
import type { KeptSession } from "./pg-session-cache.js";

/** A live-state notice of this host's transaction, with what other hosts need to announce it once. */
export interface PgLiveNotice {
  notice: LiveStateNotice;
  queueVersion?: number;
}

/** The joined session + projection row in the shape `stateFromRow` reads (booleans as 0/1). */
const STATE_COLUMNS = `s.session_id, s.owner, s.epoch, s.created_at, s.fork_of_session, s.fork_of_seq,
  ${headSeqOf(logKeyOf("p"))} AS head_seq, ${logKeyOf("p")} AS log_key, p.data_bytes, p.data_bytes_seq,
  s.base_title, s.base_title_explicit::int AS base_title_explicit, s.base_model, s.acked_settled_at AS base_acked,
  p.title, p.title_explicit::int AS title_explicit, p.model, p.last_prompt_at, p.updated_at, p.turn_count,
  p.blank::int AS blank, p.last_state, p.message_count, p.seq, p.open_turn_id, p.turn_has_text::int AS turn_has_text,
  p.pending_interactions, p.has_unseen_completion::int AS has_unseen_completion, p.completion_settled_at, p.acked_settled_at`;

/** Live sessions' state; the caller adds the WHERE clause. */
export const SELECT_STATE = `SELECT ${STATE_COLUMNS} FROM sessions s JOIN projections p ON p.session_id = s.session_id`;

/** A session's lease row with the database clock of the transaction (`now()` is fixed in it). */
export interface LeaseReading {
  now: number;
  row: LeaseRow | undefined;
}

/** The lease rows of the listed sessions with the clock (one row of nulls but the clock when none). */
const LEASES_OF = (ids: string) => `SELECT n.now, l.session_id, l.host_id AS "hostId", l.generation,
    l.expires_at AS "expiresAt" FROM (SELECT ${DB_NOW} AS now) n LEFT JOIN leases l ON l.session_id = ANY(${ids})`;

/** A NOTIFY to send once the transaction committed. */
export interface Announcement {
  channel: string;
  payload: string;
  /** Sent whoever is present (a listener without presence lock is connected): else only when another host is. */
  everyone: boolean;
}

// the transaction's id assigned at once: the NOTIFY after COMMIT asks whether it committed
const CURRENT_XID = "SELECT pg_current_xact_id()::text AS xid";
const NOTIFY_IF_COMMITTED = `SELECT pg_notify($1, $2) WHERE pg_xact_status($3::xid8) = 'committed'
  AND ${othersPresent("$1", "$4")}`;

// A batch on kept states sends everything at once, so it cannot wait for its transaction's id: the
// id goes into a session setting that an aborted transaction reverts to the empty value, and the
// statement behind the COMMIT empties it again for the next batch. With an announcement that is the
// NOTIFY's own statement (the setting read first, in the materialized `x`), one statement less per batch.
const KEPT_XID = "SELECT current_setting('sessionmux.xid', true) AS xid";
const FORGET_XID = "set_config('sessionmux.xid', '', false)";
const NOTIFY_IF_KEPT_COMMITTED = `WITH x AS MATERIALIZED (${KEPT_XID})
  SELECT CASE WHEN pg_xact_status(nullif(x.xid, '')::xid8) = 'committed' AND ${othersPresent("$1", "$3")}
    THEN pg_notify($1, $2) END, ${FORGET_XID} FROM x`;
// Its statements are prepared once per connection and their plans never depend on the values
// (arrays of ids and rows): planning them again at every execution was a third of their time.
const BEGIN_KEPT = "BEGIN; SET LOCAL plan_cache_mode = force_generic_plan";
// The locks, and the check that every kept row is still the version kept, as each lock is granted
// (`FOR UPDATE` returns the row as the last writer committed it): otherwise SMX01 aborts the
// transaction. It runs while the host runs the operations, so the check costs the commit nothing.
// A row's xmin (the 32-bit id of the transaction that wrote this tuple) must match the version too:
// a writer that does not stamp versions (a build from before migration 6, still running) changes
// xmin with every update, so its writes are caught as well. One row back, not one per lock.
const LOCK_KEPT = `SELECT sessionmux_expect(count(*) = cardinality($1::text[])) FROM (
    SELECT session_id, version, xmin FROM projections WHERE session_id = ANY($1::text[])
    ORDER BY session_id FOR UPDATE
  ) AS locked JOIN unnest($1::text[], $2::bigint[]) AS k(session_id, version) USING (session_id)
  WHERE locked.version = k.version AND locked.xmin::text::bigint = k.version % 4294967296`;
// Last, with the rows (the statement's snapshot is from before its own inserts): each guarded
// UPDATE wrote every one of its rows (`{expected}`, see `PendingRows.take`), every kept session the
// batch did not append to still has the head kept, and every lease an append was fenced by is
// still the current one; otherwise SMX01 aborts. The head of a session the batch appended to is
// not looked up: its log's key refuses the insert if the head moved (23505, see
// `isStaleKeptState`), and a hundred lookups cost more than the rest of the check. An empty list
// skips its subquery.
const CHECK_KEPT = `SELECT sessionmux_expect({expected}
    AND (cardinality($1::text[]) = 0 OR (SELECT count(*)
      FROM unnest($1::text[], $2::bigint[]) AS k(log_key, seq) WHERE ${headSeqOf("k.log_key")} = k.seq)
      = cardinality($1::text[]))
    AND (cardinality($3::text[]) = 0 OR (SELECT count(*)
      FROM unnest($3::text[], $4::text[], $5::bigint[]) AS f(session_id, host_id, generation)
      JOIN leases l ON l.session_id = f.session_id
      WHERE l.host_id = f.host_id AND l.generation = f.generation AND l.expires_at > ${DB_NOW})
      = cardinality($3::text[]))),
  set_config('sessionmux.xid', pg_current_xact_id()::text, false) AS xid`;

/**
 * Thrown by a batch on kept states when an operation needs the database before COMMIT (a read, a
 * statement of its own, a session not kept): nothing was sent, the batch runs again the usual way.
 */
export class KeptStatesInsufficient extends Error {
  constructor() {
    super("the operation needs the database before COMMIT");
    this.name = "KeptStatesInsufficient";
  }
}

/**
 * Waits for statements sent together on the pipelined connection and fails with the first one
 * that failed (the later ones failed only because the transaction was aborted by then).
 */
async function inOrder<T extends readonly unknown[]>(
  sent: T,
): Promise<{ -readonly [K in keyof T]: Awaited<T[K]> }> {
  const settled = await Promise.allSettled(sent);
  for (const outcome of settled) if (outcome.status === "rejected") throw outcome.reason;
  return settled.map((outcome) => (outcome as PromiseFulfilledResult<unknown>).value) as {
    -readonly [K in keyof T]: Awaited<T[K]>;
  };
}

/**
 * The announcement of a batch whose COMMIT was sent. Nothing may fail the batch from there on (its
 * operations would run again, one per transaction, though it may have committed): an announcement
 * that cannot be made is a wake-up lost, which only delays other hosts until the next one.
 */
function announced(announce: () => Announcement | null): Announcement | null {
  try {
    return announce();
  } catch {
    return null;
  }
}

/** For statements whose outcome nothing waits for. */
const nothing = () => undefined;

type LeaseOfRow = { now: number; session_id: string | null } & LeaseRow;

interface Corkable {
  cork?(): void;
  uncork?(): void;
}

/**
 * Runs `send` with the connection's socket corked, so the statements it sends (each already one
 * write) leave in one system call rather than one each: on a loaded host that was a third of the
 * writer's CPU per transaction. `pg` keeps the socket private; without it this only sends.
 */
function together<T>(client: pg.ClientBase, send: () => T): T {
  const stream = (client as unknown as { connection?: { stream?: Corkable } }).connection?.stream;
  stream?.cork?.();
  try {
    return send();
  } finally {
    stream?.uncork?.();
  }
}

/** A `text[]` literal for the simple protocol, which runs several statements in one round trip. */
function textArray(client: pg.ClientBase, values: readonly string[]): string {
  return `ARRAY[${values.map((value) => client.escapeLiteral(value)).join(", ")}]::text[]`;
}

/**
 * One group-commit transaction on PostgreSQL: the session rows it holds locked (loaded once,
 * `FOR UPDATE`), the rows its operations produced (written set-wise by `PendingRows`), and the
 * notices to deliver after COMMIT. What it committed may be kept for the next one (see
 * `PgSessionCache`), which then has the database check, under the same locks, that no host wrote
 * those rows in between; a batch never trusts a state it did not read or have checked.
 */
export class PgWriteBatch {
  readonly notices: PendingNotice[] = [];
  /** Live-state notices, delivered after the commit notices of the same transaction. */
  readonly liveNotices: PgLiveNotice[] = [];
  appendedEvents = 0;
  /** Stored event data this transaction moved per owner, written with its commit. */
  readonly ownerDataBytes = new OwnerDataBytes();
  private readonly states = new Map<string, SessionState | "retired" | null>();
  private readonly dirty = new Map<string, SessionState>();
  private readonly created = new Set<string>();
  /** Set when the commit's statement is built (see `writtenRows`). */
  private written: Set<string> | undefined;
  /** Sessions this transaction inserts events into. */
  private readonly appendedTo = new Set<string>();
  private readonly prompts = new Map<string, PromptRecord>();
  /** Lease rows read with the locks, dropped when this transaction writes one. */
  private readonly leases = new Map<string, LeaseReading>();
  private readonly rows = new PendingRows();
  /** Each session's projection as its row holds it until COMMIT writes the dirty ones. */
  private readonly loaded = new Map<string, ProjectionState>();
  /** Each locked session's row version: as read under the lock, or as kept. */
  private readonly versions = new Map<string, number>();
  /** Between BEGIN and the COMMIT (or ROLLBACK) sent for it. */
  open = false;
  /**
   * Once its COMMIT went out: from then on a lost connection leaves the outcome unknown. Before
   * it, nothing of the transaction can commit, whatever of it reached the server: a backend whose
   * connection ended rolls back, and one left waiting for more on a path gone half-open is ended
   * once it idled in its transaction for `IDLE_IN_TRANSACTION_TIMEOUT_MS`, its locks with it.
   */
  commitSent = false;
  private xid = "";
  /** Set when the batch runs on kept states: what it used, for the database to check at COMMIT. */
  private kept:
    | {
        seqs: Map<string, number>;
        /** BEGIN and the locks, sent at the start. */
        started: readonly [Promise<pg.QueryResult>, Promise<pg.QueryResult>];
        fences: [string[], string[], number[]];
      }
    | undefined;

  constructor(readonly client: pg.ClientBase) {}

  /**
   * Starts on kept states instead of reading: sends BEGIN and the locks (in session id order, as
   * `lockAndLoad` takes them), with the check that the rows are still the versions kept, without
   * waiting for them; the writes and the last checks go with COMMIT, and the batch waits once, for
   * all of it.
   */
  beginKept(sessions: ReadonlyMap<string, KeptSession>): void {
    const seqs = new Map<string, number>();
    for (const [id, { state, version }] of sessions) {
      this.states.set(id, state);
      this.loaded.set(id, state.projection);
      this.versions.set(id, version);
      seqs.set(id, state.headSeq);
    }
    const ids = [...seqs.keys()];
    const lockParams = [textArrayLiteral(ids), integerArrayLiteral(ids.map((id) => this.versions.get(id)!))];
    // PostgreSQL takes the locks while this host runs the operations: their answers are awaited
    // with COMMIT's (or by `abandon`), so neither waits for the other
    const started = together(
      this.client,
      () =>
        [
          this.client.query(BEGIN_KEPT),
          this.client.query({ name: "sessionmux_lock_kept", text: LOCK_KEPT, values: lockParams }),
        ] as const,
    );
    for (const sent of started) sent.catch(nothing);
    this.open = true;
    this.kept = { seqs, started, fences: [[], [], []] };
  }

  /**
   * Ends a batch on kept states that an operation found insufficient: its transaction (begun, the
   * locks maybe taken, nothing written) is rolled back before the batch runs again the usual way.
   */
  async abandon(): Promise<void> {
    if (!this.kept) return;
    const rollback = this.open ? this.client.query("ROLLBACK") : undefined;
    this.open = false;
    await Promise.allSettled([...this.kept.started, rollback]);
  }

  /**
   * On kept states, records that the batch counts on the lease being the session's current one:
   * the database checks it at COMMIT (aborting otherwise, and the batch runs again the usual way).
   * False when the batch reads leases itself.
   */
  expectLease(sessionId: string, lease: SessionLease): boolean {
    if (!this.kept) return false;
    this.kept.fences[0].push(sessionId);
    this.kept.fences[1].push(lease.hostId);
    this.kept.fences[2].push(lease.generation);
    return true;
  }

  /**
   * After COMMIT: each session's state as committed and its row's version (this transaction's id
   * where it wrote the row), and the sessions no longer kept (deleted, missing).
   */
  committedStates(): { states: [SessionState, number][]; gone: string[] } {
    const states: [SessionState, number][] = [];
    const gone: string[] = [];
    for (const [id, state] of this.states) {
      const version = this.rowVersion(id);
      if (state && state !== "retired" && version !== undefined) states.push([state, version]);
      else gone.push(id);
    }
    return { states, gone };
  }

  /**
   * Starts the transaction and locks and loads the listed sessions, all in one round trip (the
   * connection is pipelined): BEGIN, the transaction id, then the row locks (taken in session id order by every host, so two
   * batches never wait on each other in a cycle) and the reads in order, each read with a snapshot
   * taken after the locks were granted, so it sees what the previous holder committed.
   */
  async begin(sessionIds: readonly string[]): Promise<void> {
    const begun = this.client.query("BEGIN");
    this.open = true;
    const xid = this.client.query<{ xid: string }>(CURRENT_XID);
    const [, started] = await inOrder([begun, xid, this.lockAndLoad(sessionIds)]);
    this.xid = started.rows[0]!.xid;
  }

  /** Locks and loads every listed session not loaded yet (one round trip). */
  async lock(sessionIds: readonly string[]): Promise<void> {
    await this.lockAndLoad(sessionIds);
  }

  async load(sessionId: string): Promise<SessionState | "retired" | null> {
    if (!this.states.has(sessionId)) await this.lock([sessionId]);
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

  /** Sessions of `owner` this transaction created and still holds (their projections are pending). */
  createdFor(owner: string): number {
    let count = 0;
    for (const sessionId of this.created) {
      const state = this.states.get(sessionId);
      if (state && state !== "retired" && state.owner === owner) count++;
    }
    return count;
  }

  notify(
    sessionId: string,
    notice: CommitNotice,
    projection: SessionProjection | null,
    dismissal?: PendingNotice["dismissal"],
  ): void {
    this.notices.push(
      dismissal ? { sessionId, notice, projection, dismissal } : { sessionId, notice, projection },
    );
  }

  /** `queueVersion`: the version a queue notice announces, so other hosts announce it once. */
  notifyLive(notice: LiveStateNotice, queueVersion?: number): void {
    this.liveNotices.push(queueVersion === undefined ? { notice } : { notice, queueVersion });
  }

  snapshot(state: SessionState): SessionProjection {
    return publicProjection(state.projection);
  }

  /** An event of `sessionId`, stored under its log's key. */
  addEvent(sessionId: string, logKey: string, seq: number, type: string, at: number, data: Uint8Array): void {
    this.appendedTo.add(sessionId);
    this.rows.event(logKey, seq, type, at, data);
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

  /** A search row, stored under the log's key. */
  index(logKey: string, seq: number, text: string): void {
    this.rows.document(logKey, seq, text);
  }

  /** Runs a read inside the transaction after writing what is pending, so it sees this batch's rows. */
  async read<R extends pg.QueryResultRow>(sql: string, params: unknown[]): Promise<R[]> {
    this.needDatabase();
    const [, result] = await inOrder([this.flush(), this.client.query<R>(sql, params)]);
    return result.rows;
  }

  /** Runs a write inside the transaction after writing what is pending, keeping statement order. */
  async execute(sql: string, params: unknown[]): Promise<void> {
    this.needDatabase();
    await inOrder([this.flush(), this.client.query(sql, params)]);
  }

  /**
   * The session's lease row as read right after its lock was granted, unless this transaction
   * wrote it since. A lease changes hands only under that lock (see `PgLeaseOperations.acquire`),
   * so the row stays the current one until COMMIT; a renewal, which runs outside the group commit
   * (`PgLeaseRenewal`), can only have moved its expiry later meanwhile.
   */
  lease(sessionId: string): LeaseReading | undefined {
    return this.leases.get(sessionId);
  }

  /** This transaction wrote (or deleted) the session's lease row: read it from the table again. */
  leaseWritten(sessionId: string): void {
    this.leases.delete(sessionId);
  }

  /**
   * Last round trip: pending rows, heads and projections in one statement, COMMIT, and the
   * announcement to other hosts, sent together. `announce` is asked for it once the COMMIT is on
   * its way, so encoding it overlaps the commit's flush to disk instead of delaying it. The NOTIFY runs in a transaction of its own after
   * the COMMIT (so it adds no lock to it) and only if the write transaction committed and another
   * host is present (see `pg-host-presence.ts`). After a
   * failed statement PostgreSQL answers the COMMIT with ROLLBACK: the transaction is over either way.
   * Resolves with COMMIT's answer: the NOTIFY behind it is not waited for (the connection runs it
   * before anything sent later, even its closing).
   */
  async commit(announce: () => Announcement | null): Promise<void> {
    if (this.kept) return this.commitKept(announce);
    const statement = this.rows.take(this.commitRows());
    const write = statement ? this.client.query(statement.sql, statement.params) : undefined;
    const commit = this.client.query("COMMIT");
    this.open = false;
    this.commitSent = true;
    const announcement = announced(announce);
    if (announcement) {
      this.client
        .query({
          name: "sessionmux_notify",
          text: NOTIFY_IF_COMMITTED,
          values: [announcement.channel, announcement.payload, this.xid, announcement.everyone],
        })
        // a lost wake-up is harmless: other hosts read by seq on the next one
        .catch(nothing);
    }
    const [, committed] = await inOrder([write, commit]);
    if (committed.command !== "COMMIT") throw new Error("the write transaction was rolled back at COMMIT");
  }

  /**
   * The rest of a batch on kept states, behind the BEGIN and locks `beginKept` sent: the check of
   * what the batch used, the rows and COMMIT; then the NOTIFY, which also resets the setting it
   * reads (or the reset alone); then the one wait, until COMMIT answered. A failed check aborts the
   * transaction with SMX01.
   */
  private async commitKept(announce: () => Announcement | null): Promise<void> {
    const { seqs, started, fences } = this.kept!;
    // the kept sessions the batch did not append to: it relies on their heads (its notices carry them)
    const read = [...seqs.keys()].filter((id) => !this.appendedTo.has(id));
    const check = {
      sql: CHECK_KEPT,
      params: [
        // by the keys the states were kept with: a clear since moved the log (and the row's version)
        textArrayLiteral(read.map((id) => (this.states.get(id) as SessionState).logKey)),
        integerArrayLiteral(read.map((id) => seqs.get(id)!)),
        textArrayLiteral(fences[0]),
        textArrayLiteral(fences[1]),
        integerArrayLiteral(fences[2]),
      ],
    };
    // the check ends the write statement: it reads the rows as they were before its writes
    const statement = this.rows.take(this.commitRows({ result: check, versions: this.versions }))!;
    const sent = together(this.client, () => {
      const written = this.client.query<{ xid: string }>({
        name: statement.name,
        text: statement.sql,
        values: statement.params,
      });
      const commit = this.client.query("COMMIT");
      this.commitSent = true;
      return [written, commit] as const;
    });
    this.open = false;
    const announcement = announced(announce);
    const after = announcement
      ? {
          name: "sessionmux_notify_kept",
          text: NOTIFY_IF_KEPT_COMMITTED,
          values: [announcement.channel, announcement.payload, announcement.everyone],
        }
      : { name: "sessionmux_forget_xid", text: `SELECT ${FORGET_XID}` };
    this.client.query(after).catch(nothing);
    const [, , written, committed] = await inOrder([...started, ...sent]);
    if (committed.command !== "COMMIT") throw new Error("the write transaction was rolled back at COMMIT");
    this.xid = written.rows[0]!.xid;
  }

  /** What the commit's statement writes besides the pending rows: projections, owners' bytes. */
  private commitRows(kept?: Pick<CommitRows, "result" | "versions">): CommitRows {
    return {
      states: [...this.dirty.values()],
      created: this.created,
      written: this.writtenRows(),
      ownerDataBytes: this.ownerDataBytes.moved(),
      ...kept,
    };
  }

  /**
   * The sessions whose projection rows the commit updates (stamping them with this transaction),
   * decided once, when the commit's statement is built: those whose projection changed beyond its
   * head. A row whose projection moved only its head (the common case: a streamed delta) is left as
   * it is: the head is the log's `max(seq)`, which every read takes instead.
   */
  private writtenRows(): ReadonlySet<string> {
    if (!this.written) {
      this.written = new Set();
      for (const [id, state] of this.dirty) {
        const before = this.loaded.get(id);
        if (!this.created.has(id) && (!before || !onlySeqMoved(before, state.projection)))
          this.written.add(id);
      }
    }
    return this.written;
  }

  /** After COMMIT: the version of the session's projection row (undefined: not locked here). */
  rowVersion(sessionId: string): number | undefined {
    return this.rowWritten(sessionId) ? Number(this.xid) : this.versions.get(sessionId);
  }

  /** Whether the commit writes the session's projection row (inserted or updated). */
  private rowWritten(sessionId: string): boolean {
    return this.created.has(sessionId) || this.writtenRows().has(sessionId);
  }

  private needDatabase(): void {
    if (this.kept) throw new KeptStatesInsufficient();
  }

  /** Sent now, on the pipelined connection, ahead of whatever is sent next. */
  private flush(): Promise<unknown> | undefined {
    const statement = this.rows.take();
    return statement ? this.client.query(statement.sql, statement.params) : undefined;
  }

  private async lockAndLoad(sessionIds: readonly string[]): Promise<void> {
    const wanted = [...new Set(sessionIds)].filter((id) => !this.states.has(id));
    if (wanted.length === 0) return;
    this.needDatabase();
    const ids = textArray(this.client, wanted);
    const statements = [
      `SELECT session_id, version FROM projections WHERE session_id = ANY(${ids}) ORDER BY session_id FOR UPDATE`,
      `${SELECT_STATE} WHERE s.session_id = ANY(${ids}) AND s.retired_at IS NULL`,
      `SELECT session_id FROM sessions WHERE session_id = ANY(${ids}) AND retired_at IS NOT NULL`,
      LEASES_OF(ids),
    ];
    const [, loaded] = await inOrder([this.flush(), this.client.query(statements.join(";\n"))]);
    const results = loaded as unknown as pg.QueryResult[];
    for (const row of results[0]!.rows as { session_id: string; version: number }[])
      this.versions.set(row.session_id, row.version);
    const [found, retiredRows, leaseRows] = results.slice(-3).map((result) => result.rows) as [
      SessionStateRow[],
      { session_id: string }[],
      LeaseOfRow[],
    ];
    const retired = new Set(retiredRows.map((row) => row.session_id));
    for (const row of found) {
      const state = stateFromRow(row);
      this.states.set(row.session_id, state);
      this.loaded.set(row.session_id, state.projection);
    }
    for (const id of wanted) {
      if (!this.states.has(id)) this.states.set(id, retired.has(id) ? "retired" : null);
    }
    this.keepLeases(wanted, leaseRows);
  }

  private keepLeases(wanted: readonly string[], rows: readonly LeaseOfRow[]): void {
    const now = rows[0]?.now;
    if (now === undefined) return;
    const byId = new Map<string, LeaseRow>();
    for (const { session_id: id, hostId, generation, expiresAt } of rows)
      if (id !== null) byId.set(id, { hostId, generation, expiresAt });
    for (const id of wanted) this.leases.set(id, { now, row: byId.get(id) });
  }
}
