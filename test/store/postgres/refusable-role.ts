import { randomBytes } from "node:crypto";
import pg from "pg";
import { pgUrl } from "../contract/backends.js";
import { runningEnded } from "./listen-watermark.js";

/**
 * A database role of its own owning a schema of its own, that the test can refuse logins to and
 * cut off, as a restarting database or a full connection table would: the way to make PostgreSQL
 * itself refuse one store's connections while the others carry on.
 */
/**
 * Runs `sql` holding a lock every test process takes for it: a grant on the database, and the
 * revoke `DROP OWNED` makes of it, rewrite the database's one catalog row, and two at once fail
 * with "tuple concurrently updated".
 */
async function onDatabaseRow(admin: pg.Client, sql: string): Promise<void> {
  await admin.query("BEGIN");
  try {
    await admin.query("SELECT pg_advisory_xact_lock(hashtext('sessionmux test: database grants'))");
    await admin.query(sql);
    await admin.query("COMMIT");
  } catch (error) {
    await admin.query("ROLLBACK").catch(() => undefined);
    throw error;
  }
}

export async function refusableRole(prefix: string) {
  const role = `${prefix}_${randomBytes(4).toString("hex")}`;
  const schema = `${role}_data`;
  const admin = new pg.Client({ connectionString: pgUrl! });
  await admin.connect();
  await admin.query(`CREATE ROLE ${role} LOGIN`);
  await admin.query(`CREATE SCHEMA ${schema} AUTHORIZATION ${role}`);
  const { rows } = await admin.query<{ db: string }>("SELECT current_database() AS db");
  // `CREATE SCHEMA IF NOT EXISTS` asks for it even when the schema is there
  await onDatabaseRow(admin, `GRANT CREATE ON DATABASE "${rows[0]!.db}" TO ${role}`);
  const url = new URL(pgUrl!);
  url.username = role;
  return {
    role,
    schema,
    /** The database as this role. */
    url: url.toString(),
    /** The role may not log in, and every connection it has ends. */
    async lockOut() {
      await admin.query(`ALTER ROLE ${role} NOLOGIN`);
      await admin.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1", [role]);
    },
    async letIn() {
      await admin.query(`ALTER ROLE ${role} LOGIN`);
    },
    /** Whether a LISTEN connection of this role is open. */
    async listening(): Promise<boolean> {
      const found = await admin.query(
        "SELECT 1 FROM pg_stat_activity WHERE usename = $1 AND application_name IN ('sessionmux-feed', 'sessionmux-calls') AND query LIKE '%LISTEN%'",
        [role],
      );
      return found.rows.length > 0;
    },
    /**
     * Resolves once every transaction running in the database now (any test's) has ended, so a
     * LISTEN begun after it counts everything written so far as older than itself.
     */
    runningEnded: () => runningEnded(admin),
    /** Drops the role, with its schema and its grant (what it owns); stores on it are closed first. */
    async drop() {
      await onDatabaseRow(admin, `DROP OWNED BY ${role} CASCADE`).catch(() => undefined);
      await admin.query(`DROP ROLE IF EXISTS ${role}`);
      await admin.end();
    },
  };
}
