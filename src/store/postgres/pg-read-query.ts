import type pg from "pg";
import { runOn } from "./pg-idle-lost.js";

/**
 * Runs `read`, which only reads (SELECTs, never a write), on a connection of `pool`, and runs it
 * again at once on the pool's next connection while the one it had died while idle (see
 * `runOn`, `lostWhileIdle`): the caller sees no error for a blip the database is back from. Not
 * tried again: a failure on a connection made for this read or a connect that failed (the path is
 * down now), an error the server answered with a SQLSTATE, a connection the watch found lost.
 */
export function readOn<T>(pool: pg.Pool, read: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  // a read changes nothing: run twice, it is run once
  return runOn(pool, read);
}

/** One statement that only reads, run as `readOn` runs a read: again on the next connection while an idle one was lost. */
export function readQuery<R extends pg.QueryResultRow = pg.QueryResultRow>(
  pool: pg.Pool,
  text: string,
  values?: unknown[],
): Promise<pg.QueryResult<R>> {
  return readOn(pool, (client) => client.query<R>(text, values));
}
