import type pg from "pg";
import { readOn } from "./pg-read-query.js";

/**
 * Runs `read`, which only reads, as `readOn` runs it, with PostgreSQL's `statement_timeout` at
 * `ms` for each of its statements: one that runs longer (waits on a lock included) is cancelled by
 * the server itself, so the database stops working on it even when nobody waits for its answer any
 * more (the caller gone, its call timed out). The setting is the connection's only while the read
 * runs: put back (`RESET`) once it answered, and a read that failed releases its connection with
 * the error, which the pool then closes, setting and all. No other statement sent on the pool (a
 * purge, a lease renewal, a call inbox's claim, all of them writes) ever runs under it.
 */
export function boundedReadOn<T>(
  pool: pg.Pool,
  ms: number,
  read: (client: pg.PoolClient) => Promise<T>,
): Promise<T> {
  if (!Number.isSafeInteger(ms) || ms <= 0) throw new RangeError(`a statement timeout of ${ms} ms`);
  return readOn(pool, async (client) => {
    await client.query(`SET statement_timeout = ${ms}`);
    const answer = await read(client);
    await client.query("RESET statement_timeout");
    return answer;
  });
}

/** The server cancelled a statement for running past its `statement_timeout` (not an operator's cancel). */
export function isStatementTimeout(err: unknown): boolean {
  const { code, message } = (err ?? {}) as { code?: unknown; message?: unknown };
  return code === "57014" && typeof message === "string" && /statement timeout/u.test(message);
}
