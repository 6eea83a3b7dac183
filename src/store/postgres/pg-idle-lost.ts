import type pg from "pg";
import { wasFoundLost } from "./pg-backend-watch.js";
import { isPgConnectionLost } from "./pg-errors.js";
import { answersOn, wasIdleInPool } from "./pg-pool.js";

/** A connection as it was handed out of its pool (see `handedOut`, `lostWhileIdle`). */
export interface HandedOut {
  readonly client: pg.PoolClient;
  /** Whether it had been in the pool before, where it may have idled. */
  readonly idled: boolean;
  /** The statements the server had answered on it until then (see `answersOn`). */
  readonly answers: number;
}

/** Notes what `lostWhileIdle` asks, before the connection's work is sent and it is released. */
export function handedOut(client: pg.PoolClient): HandedOut {
  return { client, idled: wasIdleInPool(client), answers: answersOn(client) };
}

/**
 * After a network blip a pool still holds connections whose sockets died while idle (TCP
 * keepalive finds them only after its probes), and the next statement handed one fails at once (a
 * reset, a close) though the database is back. True when `err`, the failure of the work sent on
 * `handed` since it was handed out, is such a one: the connection had idled in its pool, the server
 * answered no statement of that work whole (and not with a SQLSTATE: `err` is the connection's),
 * and it was not the statement watch that found it lost (a silent path, found only after a check
 * period that each of the pool's other connections on that path would cost again:
 * `wasFoundLost`). Not for a connection made for this work, nor a connect that failed: the path
 * is down now.
 *
 * The server may still have run what was sent (the connection lost after the statement reached it,
 * before its answer came back): the client cannot tell. Only a read, or a write whose second run
 * cannot add to its first, may be sent again (see `runOn`).
 */
export function lostWhileIdle(handed: HandedOut, err: unknown): boolean {
  return (
    handed.idled &&
    answersOn(handed.client) === handed.answers &&
    isPgConnectionLost(err) &&
    !wasFoundLost(handed.client)
  );
}

/**
 * How many times work meeting idle connections that died is tried: each failure takes one dead
 * connection out of the pool (released with its error, so the pool drops it), so at most as many
 * as the pool holds, then a new one.
 */
export function idleLostTries(pool: pg.Pool): number {
  return 1 + (pool.options.max ?? 10);
}

export interface RunOptions {
  /** Hands out a connection of the pool (its own `connect` unless given). */
  connect?: () => Promise<pg.PoolClient>;
  /** Gives back a connection whose work failed with `err` (released with the error unless given). */
  release?: (client: pg.PoolClient, err: unknown) => void;
}

/**
 * Runs `work` on a connection of `pool`, and again at once on the pool's next connection while
 * the one it had died while idle (see `lostWhileIdle`). Only for work whose second run cannot do
 * what the first did twice, which the caller says why: a read; a write where nothing of its first
 * run can have taken effect, or whose run twice has the effect of once. pg's pool hands out its
 * most recently released idle connection first, so the next try takes the next idle one and, once
 * none is left, a new connection; at most `idleLostTries`.
 */
export async function runOn<T>(
  pool: pg.Pool,
  work: (client: pg.PoolClient) => Promise<T>,
  options: RunOptions = {},
): Promise<T> {
  const tries = idleLostTries(pool);
  const connect = options.connect ?? (() => pool.connect());
  for (let tried = 1; ; tried++) {
    const client = await connect();
    // asked before the release below, which counts as going back to the pool
    const handed = handedOut(client);
    let result: T;
    try {
      result = await work(client);
    } catch (err) {
      if (options.release) options.release(client, err);
      else client.release(err instanceof Error ? err : true);
      if (tried >= tries || !lostWhileIdle(handed, err)) throw err;
      continue;
    }
    client.release();
    return result;
  }
}

/**
 * One statement in a transaction of its own whose second run has the effect of the first (a
 * fenced UPDATE that sets what it sets from the statement's own values and clock), sent again on
 * the next connection while the one it went out on died while idle. A write lost so may have run:
 * the server may have committed it and the connection died before its answer came back; only one
 * whose run twice is run once may be sent again. Its answer is the second run's, which sees the
 * first's rows.
 */
export function idempotentQuery<R extends pg.QueryResultRow = pg.QueryResultRow>(
  pool: pg.Pool,
  text: string,
  values?: unknown[],
): Promise<pg.QueryResult<R>> {
  return runOn(pool, (client) => client.query<R>(text, values));
}
