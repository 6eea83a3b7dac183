import type pg from "pg";

/** What a rolling upgrade's tests read of a schema on an admin connection of their own. */

/** The newest migration the schema records. */
export async function versionOf(admin: pg.Client, schema: string): Promise<number> {
  const { rows } = await admin.query<{ v: number }>(
    `SELECT max(version)::int AS v FROM "${schema}".schema_migrations`,
  );
  return rows[0]!.v;
}

/** The connections holding the schema's presence lock, as hosts hold it. */
export async function presenceHolders(admin: pg.Client, schema: string): Promise<number[]> {
  const { rows } = await admin.query<{ pid: number }>(
    `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND mode = 'ShareLock'
       AND classid = 21325 AND objid = hashtext($1)::oid AND objsubid = 2 ORDER BY pid`,
    [`sessionmux_${schema}`],
  );
  return rows.map((row) => row.pid);
}
