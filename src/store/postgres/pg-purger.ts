import type pg from "pg";
import { PurgeRuns } from "../purge-runs.js";
import type { PurgeStep } from "../sqlite-purger.js";

/**
 * 256 rows or 1 MiB of data: on the 2-core VM, a step's transaction over a 500 MB log of 200 kB
 * messages took 16 ms (median), 54 ms (99th percentile) while another connection appended; at
 * 256 KiB 10 and 41 ms, but four times the steps (and commits); at 4 MiB 40 and 270 ms.
 */
export const PG_PURGE_STEP: PurgeStep = { rows: 256, bytes: 1024 * 1024 };

/** How often a host looks for purges no host is running (the host that left them stopped). */
const POLL_MS = 60_000;

// The first purge no other host is running: its row stays locked until the step's COMMIT, so two
// hosts never delete under one key at once, and a host that stops mid-step leaves it to the next.
const CLAIM = `SELECT log_key, session_id FROM purges ORDER BY since, log_key LIMIT 1 FOR UPDATE SKIP LOCKED`;
// The key's first events, at most $2 rows and stopping at the first that brings the data to $3
// (at least one): `octet_length` of a stored value reads its size, not its content.
const DELETE_EVENTS = `DELETE FROM events WHERE session_id = $1 AND seq <= (SELECT max(seq) FROM (
    SELECT seq, sum(octet_length(data)) OVER (ORDER BY seq ROWS UNBOUNDED PRECEDING) - octet_length(data) AS before
    FROM events WHERE session_id = $1 ORDER BY seq LIMIT $2) x WHERE before < $3)`;
const DELETE_SEARCH = `DELETE FROM search_docs WHERE id IN (SELECT id FROM (
    SELECT id, sum(octet_length(text)) OVER (ORDER BY id ROWS UNBOUNDED PRECEDING) - octet_length(text) AS before
    FROM search_docs WHERE session_id = $1 ORDER BY id LIMIT $2) x WHERE before < $3)`;
/**
 * Deletes the first $2 rows of `table` that `where` ($1) finds in the order of an index that holds
 * them (`order`), stopping at the first that brings the data (`length` of each) to $3 (at least
 * one). Unordered, the plan for a range holding most of the table was a sequential scan, each step
 * reading past every row the steps before had deleted: a session's 200,000 prompt keys took 9.4 s
 * of steps, 4.4 s in the index's order.
 */
const deleteSome = (table: string, id: string, length: string, where: string, order: string) =>
  `DELETE FROM ${table} WHERE ${where} AND ${id} IN (SELECT ${id} FROM (
    SELECT ${id}, sum(n) OVER (ORDER BY ${order} ROWS UNBOUNDED PRECEDING) - n AS before
    FROM (SELECT ${id === order ? id : `${id}, ${order}`}, ${length} AS n FROM ${table} WHERE ${where} ORDER BY ${order} LIMIT $2) r) x
    WHERE before < $3)`;
const INTERACTION_BYTES = "octet_length(body) + coalesce(octet_length(resolution), 0)";
// the interactions asked in the log (migration 17); a deleted session's, whatever their key (the
// rows from before that have none), and its prompt keys
const DELETE_INTERACTIONS = deleteSome(
  "interactions",
  "interaction_id",
  INTERACTION_BYTES,
  "log_key = $1",
  "interaction_id",
);
const DELETE_SESSION_INTERACTIONS = deleteSome(
  "interactions",
  "interaction_id",
  INTERACTION_BYTES,
  "session_id = $1",
  "turn_id",
);
const DELETE_PROMPT_KEYS = deleteSome(
  "prompt_keys",
  "client_message_id",
  "octet_length(record)",
  "session_id = $1",
  "client_message_id",
);
// A deleted session's ended jobs and dismissals, in no order of their own (no index holds them by
// session and key): ordered by their key, each step sorted every row of the session left
// (100,000 jobs among 1,000,000: 2.2 s of steps, 1.1 s without). A session holding most of the
// table is read by a sequential scan, which stays linear: 1.1 s for 100,000, 5.9 s for 400,000.
const DELETE_JOBS = deleteSome("jobs", "job_id", "octet_length(label)", "session_id = $1", "session_id");
const DELETE_DISMISSALS = deleteSome(
  "dismissals",
  "principal",
  "octet_length(principal)",
  "session_id = $1",
  "session_id",
);
// A deleted session's attachment chunks, then (chunks gone) its attachments: their bytes were
// counted out at the delete, and the trigger that counts a deleted attachment out skips a purged
// session's (migration 16).
const DELETE_CHUNKS = `DELETE FROM attachment_chunks c USING (
    SELECT c.attachment_id, c.idx FROM attachments a JOIN attachment_chunks c ON c.attachment_id = a.attachment_id
    WHERE a.session_id = $1 LIMIT $2) k WHERE c.attachment_id = k.attachment_id AND c.idx = k.idx`;
const DELETE_ATTACHMENTS = `DELETE FROM attachments WHERE attachment_id IN (
    SELECT attachment_id FROM attachments WHERE session_id = $1 LIMIT $2)`;
const DELETE_PURGE = "DELETE FROM purges WHERE log_key = $1";
const ANY_PURGE = "SELECT EXISTS (SELECT 1 FROM purges) AS any";

/**
 * Deletes what clears and deletes left behind (the `purges` table, migration 16): the events,
 * search rows and interactions stored under an abandoned log key (migration 17), and a deleted
 * session's interactions, prompt keys, ended jobs, dismissals and attachments. Each step is
 * a short transaction of its own on a pooled connection, never in the group commit, so the host's
 * writes never wait for it; steps follow one per event-loop turn until nothing is left. Any host
 * runs any purge (claimed by its row's lock); a purge row goes last, in the step that finds nothing
 * more under its key, so a purge a stopped host left is finished by the next host that opens the
 * store or looks again. Nothing reads these rows meanwhile: every read goes by a session's current
 * key.
 */
export class PgPurger {
  readonly #step: PurgeStep;
  readonly #runs: PurgeRuns;
  readonly #poll: NodeJS.Timeout;
  /** How many of the deletes of the purge under `key` found nothing left (see `#deleteSome`). */
  #emptied: { key: string; count: number } | undefined;

  constructor(
    private readonly pool: pg.Pool,
    step: Partial<PurgeStep> = {},
    private readonly onError: (err: unknown) => void = () => undefined,
    pollMs = POLL_MS,
    /**
     * Whether this host may still write (its store's `buildOutdated`): once the schema holds an
     * entry that needs its build stopped, it deletes by rules that entry may have replaced, so it
     * takes no step more, and leaves the purges to a host of the newer build.
     */
    private readonly mayWrite: () => boolean = () => true,
  ) {
    this.#step = {
      rows: Math.max(1, step.rows ?? PG_PURGE_STEP.rows),
      bytes: Math.max(1, step.bytes ?? PG_PURGE_STEP.bytes),
    };
    this.#runs = new PurgeRuns(() => this.step(), onError);
    this.#poll = setInterval(() => void this.wakeIfPending(), pollMs);
    this.#poll.unref();
  }

  /** Starts deleting, if it is not already; a run ends once nothing is left to claim. */
  wake(): void {
    this.#runs.wake();
  }

  /** Wakes when a purge is pending (at open: what a stopped host left). */
  async wakeIfPending(): Promise<void> {
    if (this.#runs.stopped || this.#runs.running || !this.mayWrite()) return;
    try {
      const { rows } = await this.pool.query<{ any: boolean }>(ANY_PURGE);
      if (rows[0]?.any) this.wake();
    } catch (err) {
      if (!this.#runs.stopped) this.onError(err);
    }
  }

  /** Resolves when the current run ends (at once when none runs). */
  settled(): Promise<void> {
    return this.#runs.settled();
  }

  /** No step starts after this; resolves once the one under way ended. */
  async stop(): Promise<void> {
    this.#runs.stop();
    clearInterval(this.#poll);
    await this.#runs.settled();
  }

  /** One bounded step of the first purge no other host holds; answers whether one may be left. */
  async step(): Promise<boolean> {
    if (!this.mayWrite()) return false;
    const client = await this.pool.connect();
    let failed: unknown;
    try {
      await client.query("BEGIN");
      const claimed = await client.query<{ log_key: string; session_id: string | null }>(CLAIM);
      const purge = claimed.rows[0];
      if (purge) await this.#deleteSome(client, purge.log_key, purge.session_id);
      await client.query("COMMIT");
      return purge !== undefined;
    } catch (err) {
      failed = err;
      await client.query("ROLLBACK").catch(() => undefined);
      throw err;
    } finally {
      client.release(failed instanceof Error ? failed : undefined);
    }
  }

  /**
   * The first statement of the key's that still finds rows deletes some; a statement that found
   * none is not run again for the key (nothing is ever written under an abandoned key or a deleted
   * session again): each would read its index range past the dead entries of every row deleted
   * there until vacuum comes. Run at every step, a deleted session's 200,000 interactions and
   * 200,000 prompt keys took 30 s to purge beside another session's appends, 18 s without.
   */
  async #deleteSome(client: pg.PoolClient, key: string, sessionId: string | null): Promise<void> {
    const { rows, bytes } = this.#step;
    const chunks = Math.max(1, Math.min(rows, Math.floor(bytes / (256 * 1024))));
    const deletes: [string, unknown[]][] = [
      [DELETE_EVENTS, [key, rows, bytes]],
      [DELETE_SEARCH, [key, rows, bytes]],
      [DELETE_INTERACTIONS, [key, rows, bytes]],
    ];
    if (sessionId !== null)
      deletes.push(
        [DELETE_SESSION_INTERACTIONS, [sessionId, rows, bytes]],
        [DELETE_PROMPT_KEYS, [sessionId, rows, bytes]],
        [DELETE_JOBS, [sessionId, rows, bytes]],
        [DELETE_DISMISSALS, [sessionId, rows, bytes]],
        [DELETE_CHUNKS, [sessionId, chunks]],
        [DELETE_ATTACHMENTS, [sessionId, rows]],
      );
    if (this.#emptied?.key !== key) this.#emptied = { key, count: 0 };
    const emptied = this.#emptied;
    for (; emptied.count < deletes.length; emptied.count++) {
      const [sql, params] = deletes[emptied.count]!;
      if ((await client.query(sql, params)).rowCount) return;
    }
    await client.query(DELETE_PURGE, [key]);
  }
}
