import type pg from "pg";
import { LONGEST_TIMER_MS } from "../../operations/longest-timer.js";
import { afterLoopTime } from "./loop-time.js";
import { BackendChecks } from "./pg-backend-checks.js";
import { openPool, type PgPoolOptions } from "./pg-pool.js";

/**
 * How often a transaction of the group commit, or a statement of a pool, still waiting on the
 * database is checked from another connection (see `watchBackend`): a connection whose path went
 * silent is dropped within twice this once it is asked about, three times if a question about
 * another waiting connection was in flight then.
 */
export const QUERY_CHECK_MS = 5_000;

/** The longest `QUERY_CHECK_MS` an operator may set: a handshake is bounded at twice it, a timer too. */
export const LONGEST_QUERY_CHECK_MS = Math.floor(LONGEST_TIMER_MS / 2);

/**
 * How the statements of a host's pools on one database are watched: every `everyMs`, over one
 * `BackendChecks`, so a host whose every connection waits (the store's, the call inbox's, the
 * uploads sweeper's) asks about them all over one check connection at a time.
 */
export interface QueryWatch {
  readonly checks: BackendChecks;
  readonly everyMs: number;
}

export function queryWatch(url: string, everyMs: number = QUERY_CHECK_MS): QueryWatch {
  return { checks: new BackendChecks(url, everyMs), everyMs };
}

/**
 * A pool (see `openPool`) whose every statement is watched while it waits (see
 * `watchStatementsOf`), and whose new connection's handshake, which waits on no lock, is bounded
 * at twice the watch's interval: a statement or a connect over a path that went silent fails
 * within seconds instead of when TCP gives up.
 */
export function openWatchedPool(url: string, options: PgPoolOptions, watch: QueryWatch): pg.Pool {
  const pool = openPool(url, { ...options, connectTimeoutMs: 2 * watch.everyMs });
  watchStatementsOf(pool, watch);
  return pool;
}

/**
 * Watches `client` while a transaction or a statement runs on it: every `watch.everyMs` the server is
 * asked on another connection what the client's backend does (see `BackendChecks`), and a
 * backend found lost has the client's socket destroyed: the statement waiting on it fails as on
 * a connection the server closed, instead of waiting for the kernel to give up retransmitting
 * (about 15 minutes on Linux). A deadline on the statement itself would be no bound here: a write
 * may wait on another transaction's row locks for as long as it holds them, and a healthy
 * connection cut then would turn a lock wait into failed writes; the server can tell a lock wait
 * (the backend runs) from a lost connection (it does not), the client alone cannot. Returns the
 * function that stops watching, to be called before the connection goes back to its pool.
 */
export function watchBackend(client: pg.Client, { checks, everyMs }: QueryWatch): () => void {
  let stopped = false;
  let cancel = (): void => undefined;
  const check = async () => {
    // set by the server's BackendKeyData, which the pg types leave out
    const pid = (client as pg.Client & { processID: number | null }).processID;
    const verdict = pid === null ? "unknown" : await checks.ask(pid);
    if (stopped) return;
    if (verdict === "lost") {
      foundLost.add(client);
      client.connection.stream.destroy();
    } else next();
  };
  // counted in the loop's time: after a held loop, an answer already in the socket is read, and
  // the next statement sent, before the backend is asked about (idle by then, it would be ended)
  const next = () => {
    cancel = afterLoopTime(everyMs, () => void check());
  };
  next();
  return () => {
    stopped = true;
    cancel();
  };
}

/** Connections whose socket `watchBackend` destroyed, their backend found lost. */
const foundLost = new WeakSet<pg.Client>();

/**
 * Whether the watch destroyed `client`'s socket (see `watchBackend`): its path went silent, or its
 * statement was lost on the way, which it took at least `everyMs` to find.
 */
export function wasFoundLost(client: pg.Client): boolean {
  return foundLost.has(client);
}

/**
 * Watches every statement sent on a connection of `pool` (see `watchBackend`) from when it is
 * sent until it settles: a read over a path that went silent while its connection was checked
 * out fails as on a closed connection, within three times `everyMs`, instead of waiting for TCP.
 * Only while a statement waits: a connection idle in the pool, or held between two statements, is
 * not asked about (its backend is idle then by right). Submittables (cursors, streams) are not
 * watched; no pool of a host sends any.
 */
export function watchStatementsOf(pool: pg.Pool, watch: QueryWatch): void {
  pool.on("connect", (client) => {
    // the class's method, looked up at each call (as a spy on it would be)
    const query = (...args: unknown[]): unknown =>
      (Object.getPrototypeOf(client) as { query: (...a: unknown[]) => unknown }).query.apply(client, args);
    client.query = ((...args: unknown[]) => {
      const last = args.at(-1);
      // `pool.query` hands its statement over with a callback
      if (typeof last === "function") {
        const unwatch = watchBackend(client, watch);
        return query(...args.slice(0, -1), (...answer: unknown[]) => {
          unwatch();
          return last(...answer);
        });
      }
      const result = query(...args);
      if (result instanceof Promise) {
        const unwatch = watchBackend(client, watch);
        result.then(unwatch, unwatch);
      }
      return result;
    }) as typeof client.query;
  });
}
