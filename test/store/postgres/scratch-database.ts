import { randomBytes } from "node:crypto";
import pg from "pg";

/** A database of a test's own on the server at `serverUrl`, for what a schema cannot keep apart. */
export interface ScratchDatabase {
  name: string;
  url: string;
  /** A connection to the server's own database (not this one), for queries about this one. */
  server: pg.Client;
  /** Drops the database, ending whatever is still connected to it. */
  drop(): Promise<void>;
}

/** `options`: what `CREATE DATABASE` is given after the name (`ENCODING …`). */
export async function scratchDatabase(
  serverUrl: string,
  prefix: string,
  options = "",
): Promise<ScratchDatabase> {
  const server = new pg.Client({ connectionString: serverUrl });
  await server.connect();
  const name = `${prefix}_${randomBytes(4).toString("hex")}`;
  try {
    await server.query(`CREATE DATABASE "${name}" ${options}`);
  } catch (err) {
    await server.end();
    throw err;
  }
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return {
    name,
    url: url.toString(),
    server,
    async drop() {
      await server.query(`DROP DATABASE "${name}" WITH (FORCE)`);
      await server.end();
    },
  };
}

/** The host's connections (pooled, listening, checks: named `sessionmux…`) still open in `scratch`. */
export async function hostConnections(scratch: ScratchDatabase): Promise<number> {
  const { rows } = await scratch.server.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM pg_stat_activity
     WHERE datname = $1 AND application_name LIKE 'sessionmux%'`,
    [scratch.name],
  );
  return rows[0]!.n;
}
