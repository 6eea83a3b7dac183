import type pg from "pg";
import type { DismissalOutcome } from "../dismissals.js";
import { readQuery } from "./pg-read-query.js";
import type { PgWriteBatch } from "./pg-write-batch.js";
import type { PgWriteOperation } from "./pg-write-operations.js";

const INSERT = `INSERT INTO dismissals (principal, session_id, dismissed_at) VALUES ($1, $2, $3)
  ON CONFLICT DO NOTHING`;
const DELETE = "DELETE FROM dismissals WHERE principal = $1 AND session_id = $2";
// a deleted session's dismissals wait for the purger (its id is never created again): found by no read
const FIND = `SELECT 1 FROM dismissals d WHERE d.principal = $1 AND d.session_id = $2
  AND EXISTS (SELECT 1 FROM projections p WHERE p.session_id = d.session_id)`;

/**
 * A write to one principal's dismissal of a live session, under the session's row lock: a delete
 * on another host either went first (then the session is found retired: `not_found`) or waits, and
 * deletes the row this writes.
 *
 * A change is announced as a `meta` commit notice marked `dismissal` (as the SQLite side does):
 * every host's list of that principal changed with it, and a host that keeps encoded lists
 * (`GET /api/chat/sessions`) drops them on any commit notice, so one served after a dismissal on
 * this or another host leaves the session out. The row did not change: the notice carries none.
 * The other hosts' NOTIFY also says whose dismissal it is and its new state (never told to a
 * commit listener): each tells that principal's sockets on it (`session.dismissed`).
 */
function onLiveSession(
  sessionId: string,
  principal: string,
  dismissed: boolean,
  write: (batch: PgWriteBatch) => Promise<pg.QueryResult>,
): PgWriteOperation<DismissalOutcome> {
  return {
    sessions: [sessionId],
    run: async (batch) => {
      const state = await batch.load(sessionId);
      if (state === null || state === "retired") return { status: "not_found" };
      const { rowCount } = await write(batch);
      const changed = (rowCount ?? 0) > 0;
      if (changed) batch.notify(sessionId, { kind: "meta", dismissal: true }, null, { principal, dismissed });
      return { status: "ok", changed };
    },
  };
}

/**
 * The PostgreSQL side of `DismissalStore`: writes join the host's group commit (one transaction,
 * `synchronous_commit = on`); the unique key makes a repeated dismissal a no-op on any host.
 */
export const pgDismissals = {
  dismiss(sessionId: string, principal: string, at: number): PgWriteOperation<DismissalOutcome> {
    return onLiveSession(sessionId, principal, true, (batch) =>
      batch.client.query(INSERT, [principal, sessionId, at]),
    );
  },

  restore(sessionId: string, principal: string): PgWriteOperation<DismissalOutcome> {
    return onLiveSession(sessionId, principal, false, (batch) =>
      batch.client.query(DELETE, [principal, sessionId]),
    );
  },

  /**
   * Read before a `resume` call answers (to restore the session); the store's `isDismissed` has
   * the database failing it reject `persistence_failure` (`pgRead`), as the restore's own write would.
   */
  async isDismissed(pool: pg.Pool, sessionId: string, principal: string): Promise<boolean> {
    return ((await readQuery(pool, FIND, [principal, sessionId])).rowCount ?? 0) > 0;
  },
};
