import type pg from "pg";
import { wasFoundLost } from "./pg-backend-watch.js";
import { isPgConnectionLost } from "./pg-errors.js";
import { wasIdleInPool } from "./pg-pool.js";

/**
 * Runs `read`, which only reads (SELECTs, never a write), on a connection of `pool`, and runs it
 * again at once on the pool's next connection while the one it had was an idle one that turned
 * out lost: after a network blip the pool still holds connections whose sockets died while idle
 * (TCP keepalive finds them only after its probes), and the next statement handed one fails at
 * once (a reset, a close) though the database is back. The failed connection is released with its
 * error, so the pool drops it; pg's pool hands out its most recently released idle connection
 * first, so the next try takes the next idle one and, once none is left, a new connection.
 *
 * Each failure tried again takes a dead connection out of the pool, so there are at most as many
 * as the pool holds (`max`), all at once. Not tried again: a failure on a connection made for this
 * read (the path is down now), a connect that failed (likewise), an error the server answered with
 * a SQLSTATE (it saw the statement), and a connection the watch found lost while a statement
 * waited (`wasFoundLost`: a silent path, found only after a check period, which each of the pool's
 * other connections on that path would cost again).
 */
export async function readOn<T>(pool: pg.Pool, read: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const tries = 1 + (pool.options.max ?? 10);
  for (let tried = 1; ; tried++) {
    const client = await pool.connect();
    // asked before the release below, which counts as going back to the pool
    const idled = wasIdleInPool(client);
    let result: T;
    try {
      result = await read(client);
    } catch (err) {
      client.release(err instanceof Error ? err : true);
      const idleOneLost = idled && isPgConnectionLost(err) && !wasFoundLost(client);
      if (!idleOneLost || tried >= tries) throw err;
      continue;
    }
    client.release();
    return result;
  }
}

/** One statement that only reads, run as `readOn` runs a read: again on the next connection while an idle one was lost. */
export function readQuery<R extends pg.QueryResultRow = pg.QueryResultRow>(
  pool: pg.Pool,
  text: string,
  values?: unknown[],
): Promise<pg.QueryResult<R>> {
  return readOn(pool, (client) => client.query<R>(text, values));
}
