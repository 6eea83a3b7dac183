import type pg from "pg";
import { openWatchedPool, type QueryWatch, queryWatch } from "../store/postgres/pg-backend-watch.js";
import { idempotentQuery } from "../store/postgres/pg-idle-lost.js";
import { poolStatsOf } from "../store/postgres/pg-pool.js";
import { readQuery } from "../store/postgres/pg-read-query.js";
import type { PoolStats } from "../store/store-metrics.js";
import { UPLOAD_MIN_COUNTED_BYTES } from "../store/upload-counted-bytes.js";
import type { UploadSweeper } from "./host-database.js";

/** Rows deleted per statement, so one sweep of many large uploads never holds a lock long. */
const STEP_ROWS = 16;

/** What `owner`'s uploads no prompt references yet count toward the upload quota (`$1` the owner). */
export const PENDING_BYTES = `SELECT COALESCE(SUM(GREATEST(size, ${UPLOAD_MIN_COUNTED_BYTES})), 0)::bigint AS bytes
  FROM attachments WHERE owner = $1 AND session_id IS NULL`;

/**
 * One step of the sweep: up to `STEP_ROWS` uploads no prompt references, created before `$1`.
 * The step is materialized: as a subquery of the DELETE itself, PostgreSQL may run the LIMIT
 * again per row it joins and delete every expired upload in one statement.
 */
export const SWEEP_STEP = `WITH step AS MATERIALIZED (
    SELECT attachment_id FROM attachments WHERE session_id IS NULL AND created_at < $1
    LIMIT ${STEP_ROWS} FOR UPDATE SKIP LOCKED)
  DELETE FROM attachments WHERE session_id IS NULL
    AND attachment_id IN (SELECT attachment_id FROM step)`;

/**
 * Uploads not yet referenced by a prompt (`session_id IS NULL`) on PostgreSQL: what a principal
 * holds of them (the upload quota) and their expiry. Each host sweeps; the outer `session_id IS
 * NULL` is re-checked on a row a prompt claimed meanwhile, so a referenced upload is never deleted,
 * and `SKIP LOCKED` keeps two hosts' sweeps from waiting on each other. Its statements are watched
 * as the store's reads are (`watch`, by default one of its own every 5 s): an upload's quota read
 * over a path that went silent fails instead of holding the upload until TCP gives up.
 */
export function pgUploadSweeper(
  url: string,
  schema: string,
  watch: QueryWatch = queryWatch(url),
  /**
   * Whether the host may still write (its store's `buildOutdated`): once the schema holds an entry
   * that needs its build stopped, the sweep deletes nothing, since that entry may have changed which
   * uploads a prompt references; a host of the newer build sweeps them.
   */
  mayWrite: () => boolean = () => true,
): UploadSweeper & { poolStats(): PoolStats; close(): Promise<void> } {
  const pool: pg.Pool = openWatchedPool(url, { schema, max: 1 }, watch);
  pool.on("error", () => undefined);
  let timer: NodeJS.Timeout | undefined;
  /** The sweep under way: `close` lets it end before the pool does, which would refuse its next step. */
  let sweeping: Promise<void> | undefined;
  let closing = false;
  const sweep = async (before: number): Promise<number> => {
    let deleted = 0;
    // a closing sweeper ends after the step under way: the uploads left are the next sweep's, and
    // a backlog of them (after an outage, many large ones) would hold the host's close for minutes
    while (!closing && mayWrite()) {
      // A step run twice (its connection died while idle, see `idempotentQuery`) deletes what one
      // run would, or the next step's rows.
      const { rowCount } = await idempotentQuery(pool, SWEEP_STEP, [before]);
      deleted += rowCount ?? 0;
      if ((rowCount ?? 0) < STEP_ROWS) break;
    }
    return deleted;
  };
  const stop = () => {
    clearInterval(timer);
    timer = undefined;
  };
  return {
    async pendingBytes(owner) {
      const { rows } = await readQuery<{ bytes: number }>(pool, PENDING_BYTES, [owner]);
      return Number(rows[0]?.bytes ?? 0);
    },
    start(ttlMs, everyMs, onError) {
      stop();
      timer = setInterval(() => {
        if (sweeping) return;
        sweeping = sweep(Date.now() - ttlMs)
          .then(() => undefined, onError)
          .finally(() => {
            sweeping = undefined;
          });
      }, everyMs);
      timer.unref();
    },
    stop,
    poolStats: () => poolStatsOf(pool),
    async close() {
      closing = true;
      stop();
      await sweeping;
      await pool.end();
    },
  };
}
