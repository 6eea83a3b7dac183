import type pg from "pg";
import { expect, vi } from "vitest";
import { LISTENING_SINCE } from "../../../src/store/postgres/pg-commit-feed.js";

type Queryable = Pick<pg.ClientBase, "query">;

/**
 * Resolves once every transaction running in the database now (any test's) has ended, so a
 * LISTEN begun after it counts everything written so far as older than itself.
 */
export async function runningEnded(db: Queryable): Promise<void> {
  const { rows } = await db.query<{ next: string }>(
    "SELECT pg_snapshot_xmax(pg_current_snapshot())::text AS next",
  );
  await vi.waitFor(
    async () => {
      const ended = await db.query<{ ended: boolean }>(
        "SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint >= $1::bigint AS ended",
        [rows[0]!.next],
      );
      expect(ended.rows[0]!.ended).toBe(true);
    },
    { timeout: 20_000, interval: 20 },
  );
}

/**
 * The watermark a host's LISTEN connection would record if it began now (its statement's 32-bit
 * id), taken once everything written so far is older than it.
 */
export async function listenWatermark(db: Queryable): Promise<string> {
  await runningEnded(db);
  const { rows } = await db.query<{ xid: string }>(LISTENING_SINCE);
  return rows[0]!.xid;
}
