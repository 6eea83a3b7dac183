import pg from "pg";
import { poolStatsOf } from "../store/postgres/pg-pool.js";
import { schemaIdentifier } from "../store/postgres/pg-schema.js";
import { stoppingVersion } from "../store/postgres/pg-schema-fence.js";
import type { PoolStats } from "../store/store-metrics.js";

/**
 * `/readyz` on PostgreSQL: one connection of its own (so a pool exhausted by a burst of writes
 * reads as busy, not as down), asking whether the server accepts writes. A standby (read-only,
 * `pg_is_in_recovery()`) or an unreachable server is not ready; both checks time out quickly.
 * Given the store's `schema`, the same statement reads the newest of its entries that needs
 * earlier builds stopped (`stoppingVersion`), which `check` answers (else 0).
 */
export function pgReadyCheck(
  url: string,
  timeoutMs = 2_000,
  schema?: string,
): { check(): Promise<number>; poolStats(): PoolStats; close(): Promise<void> } {
  const stopping = schema ? `(${stoppingVersion(`${schemaIdentifier(schema)}.schema_migrations`)})` : "0";
  const pool = new pg.Pool({
    connectionString: url,
    max: 1,
    idleTimeoutMillis: 60_000,
    connectionTimeoutMillis: timeoutMs,
    query_timeout: timeoutMs,
    application_name: "sessionmux-ready",
  });
  // a dropped idle connection is reconnected by the next check, never a process crash
  pool.on("error", () => undefined);
  return {
    async check() {
      const { rows } = await pool.query<{ standby: boolean; stopping: number }>(
        `SELECT pg_is_in_recovery() AS standby, ${stopping} AS stopping`,
      );
      if (rows[0]?.standby) throw new Error("the PostgreSQL server is a read-only standby");
      return Number(rows[0]?.stopping ?? 0);
    },
    poolStats: () => poolStatsOf(pool),
    close: () => pool.end(),
  };
}
