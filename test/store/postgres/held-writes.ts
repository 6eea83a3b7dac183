import { randomBytes } from "node:crypto";
import pg from "pg";
import { expect } from "vitest";
import type { Cleanup } from "../../support/cleanups.js";
import { pgUrl } from "../contract/backends.js";

/**
 * The backends waiting for a lock the backend `pid` holds: `direct`ly, or `behind` one of those.
 * Counted by who blocks whom, not by query text, so other tests' writes on the same database
 * (another schema, another run) never count.
 */
export async function blockedBy(
  watcher: pg.Client,
  pid: number,
): Promise<{ direct: number; behind: number }> {
  await freshActivity(watcher);
  const { rows } = await watcher.query<{ direct: number; behind: number }>(
    `WITH d AS (SELECT pid FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid)))
     SELECT (SELECT count(*) FROM d)::int AS direct,
       (SELECT count(*) FROM pg_stat_activity s
         WHERE EXISTS (SELECT 1 FROM d WHERE d.pid = ANY(pg_blocking_pids(s.pid))))::int AS behind`,
    [pid],
  );
  return rows[0]!;
}

/** The backends waiting directly for a lock the backend `pid` holds, with the port each connects from. */
export async function waitingOn(watcher: pg.Client, pid: number): Promise<{ pid: number; port: number }[]> {
  await freshActivity(watcher);
  const { rows } = await watcher.query<{ pid: number; port: number }>(
    "SELECT pid, client_port AS port FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))",
    [pid],
  );
  return rows;
}

/**
 * PostgreSQL reads `pg_stat_activity` once per transaction: a watcher polling from inside one (the
 * client holding the lock, say) would see the backends of its first poll for good.
 */
async function freshActivity(watcher: pg.Client): Promise<void> {
  await watcher.query("SELECT pg_stat_clear_snapshot()");
}

/**
 * A client of its own holding `table` of `schema` locked (ACCESS EXCLUSIVE) in an open
 * transaction, as a migration would, ended by `cleanups`; with its backend's pid. `url`: the
 * database, the tests' own by default.
 */
export async function lockTable(
  cleanups: Cleanup[],
  schema: string,
  table: string,
  url = pgUrl!,
): Promise<{ admin: pg.Client; pid: number }> {
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  cleanups.push(() => admin.end());
  await admin.query("BEGIN");
  await admin.query(`LOCK TABLE "${schema}".${table} IN ACCESS EXCLUSIVE MODE`);
  return { admin, pid: await backendPid(admin) };
}

export async function backendPid(client: pg.Client): Promise<number> {
  return (await client.query<{ pid: number }>("SELECT pg_backend_pid() AS pid")).rows[0]!.pid;
}

/**
 * Makes every `event` on the schema's `sessions` rows (e.g. `INSERT`, `UPDATE OF retired_at`) wait,
 * inside its transaction, for an advisory lock the test takes with `hold()`, so a write of another
 * host can be stopped half done (its row written, its transaction open) for as long as a test needs.
 */
export function holdSessionWrites(schema: string, event: string) {
  return holdWrites(schema, "sessions", event);
}

/** `holdSessionWrites` on the rows of another of the schema's tables (e.g. `leases`). */
export async function holdWrites(schema: string, table: string, event: string) {
  const admin = new pg.Client({ connectionString: pgUrl! });
  await admin.connect();
  const key = randomBytes(4).readInt32BE();
  const name = `hold_${randomBytes(4).toString("hex")}`;
  await admin.query(`SET search_path = "${schema}"`);
  await admin.query(`CREATE FUNCTION ${name}() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN PERFORM pg_advisory_xact_lock(${key}); RETURN NULL; END $$`);
  await admin.query(
    `CREATE TRIGGER ${name} AFTER ${event} ON ${table} FOR EACH ROW EXECUTE FUNCTION ${name}()`,
  );
  const pid = await backendPid(admin);
  return {
    async hold() {
      await admin.query("SELECT pg_advisory_lock($1)", [key]);
    },
    // "held": the write waits for the test's lock; "behind": another waits for the held write
    waitFor: (which: "held" | "behind") =>
      expect
        .poll(async () => (await blockedBy(admin, pid))[which === "held" ? "direct" : "behind"], {
          timeout: 10_000,
          interval: 20,
        })
        .toBe(1),
    async release() {
      await admin.query("SELECT pg_advisory_unlock($1)", [key]);
    },
    end: () => admin.end(),
  };
}
