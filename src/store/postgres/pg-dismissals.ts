import type pg from "pg";
import type { DismissalOutcome } from "../dismissals.js";
import type { PgWriteBatch } from "./pg-write-batch.js";
import type { PgWriteOperation } from "./pg-write-operations.js";

const INSERT = `INSERT INTO dismissals (principal, session_id, dismissed_at) VALUES ($1, $2, $3)
  ON CONFLICT DO NOTHING`;
const DELETE = "DELETE FROM dismissals WHERE principal = $1 AND session_id = $2";
const FIND = "SELECT 1 FROM dismissals WHERE principal = $1 AND session_id = $2";

const liveSession = async (batch: PgWriteBatch, sessionId: string): Promise<boolean> => {
  const state = await batch.load(sessionId);
  return state !== null && state !== "retired";
};

/**
 * The PostgreSQL side of `DismissalStore`: writes join the host's group commit (one transaction,
 * `synchronous_commit = on`); the unique key makes a repeated dismissal a no-op on any host.
 */
export const pgDismissals = {
  dismiss(sessionId: string, principal: string, at: number): PgWriteOperation<DismissalOutcome> {
    return {
      // the session's row locked: a delete on another host either went first (then this finds it
      // retired) or waits, and deletes the row this writes
      sessions: [sessionId],
      run: async (batch) => {
        if (!(await liveSession(batch, sessionId))) return { status: "not_found" };
        const { rowCount } = await batch.client.query(INSERT, [principal, sessionId, at]);
        return { status: "ok", changed: (rowCount ?? 0) > 0 };
      },
    };
  },

  restore(sessionId: string, principal: string): PgWriteOperation<DismissalOutcome> {
    return {
      // the session's row locked: a delete on another host either went first (then this finds it
      // retired) or waits, and deletes the row this writes
      sessions: [sessionId],
      run: async (batch) => {
        if (!(await liveSession(batch, sessionId))) return { status: "not_found" };
        const { rowCount } = await batch.client.query(DELETE, [principal, sessionId]);
        return { status: "ok", changed: (rowCount ?? 0) > 0 };
      },
    };
  },

  async isDismissed(pool: pg.Pool, sessionId: string, principal: string): Promise<boolean> {
    return ((await pool.query(FIND, [principal, sessionId])).rowCount ?? 0) > 0;
  },
};
