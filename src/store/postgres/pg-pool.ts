import pg from "pg";
import { storeClosed } from "../store-closed.js";
import type { PoolStats } from "../store-metrics.js";
import { afterLoopTime } from "./loop-time.js";
import { checkListening, KEEPALIVE_IDLE_MS, LISTEN_CHECK_MS } from "./pg-listen-check.js";
import { schemaIdentifier } from "./pg-schema.js";
import { type Connected, connection, WaitingConnects, type Withdraw } from "./pg-waiting-connects.js";

export interface PgPoolOptions {
  /** Schema holding the store's tables. @default "public" */
  schema?: string;
  /** Connections in the pool. @default 10 */
  max?: number;
  /** Sends each query at once, before the previous ones answered (`pg` pipeline mode). @default false */
  pipeline?: boolean;
  /** How long an idle connection stays open; 0: until it fails. @default 10_000 */
  idleTimeoutMillis?: number;
  /**
   * How long a new connection's handshake may take before its socket is destroyed and the
   * connect fails (a path that went silent swallows it); 0: no bound. Only the handshake: a wait
   * for a free connection of a full pool is not bounded by it. @default 0
   */
  connectTimeoutMs?: number;
}

const INT8 = 20;

// seq, at and counts are bigint columns; every value the store keeps is a safe integer (epoch
// milliseconds, sequence numbers), so they come back as numbers rather than pg's default strings.
const types = {
  getTypeParser(oid: number, format?: string) {
    if (oid === INT8 && format !== "binary") return (value: string) => Number(value);
    return pg.types.getTypeParser(oid, format as "text");
  },
};

/**
 * A host paused in the middle of a transaction (SIGSTOP, a frozen VM, a partition) would hold its
 * row locks for as long as it is gone, and every other host's write to those sessions, a lease
 * takeover included, would wait on them. PostgreSQL ends such a session after this long idle
 * inside a transaction; no transaction of the store waits on anything but its own statements.
 */
export const IDLE_IN_TRANSACTION_TIMEOUT_MS = 5_000;

const sessionSettings = (schema: string) =>
  `-c search_path=${schema} -c synchronous_commit=on -c idle_in_transaction_session_timeout=${IDLE_IN_TRANSACTION_TIMEOUT_MS}`;

/**
 * pg's pool, whose end also settles what waits on it: a connect (a statement's too) still waiting
 * for a free connection when the pool ends, or asked for after, is refused `host_shutting_down`
 * (see `WaitingConnects`) instead of waiting for ever. One whose connection was already being made
 * is refused too, and that connection closed once made: the end waits for its handshake, which
 * the pool's connect timeout bounds.
 */
class EndingPool extends pg.Pool {
  readonly #waiting = new WaitingConnects();

  // both of pg's overloads: the promise, and the callback its own `query` passes; the callback's
  // comes with how to take the connect back (a call inbox's send refused as the inbox closes)
  override connect(): Promise<pg.PoolClient>;
  override connect(callback: Connected): Withdraw;
  override connect(callback?: Connected): Promise<pg.PoolClient> | Withdraw {
    if (!callback)
      return connection((connected) => {
        this.connect(connected);
      });
    return this.#waiting.connect((connected) => {
      super.connect(connected);
      return () => this.#unqueue(connected);
    }, callback);
  }

  /**
   * Takes a connect taken back (refused) out of pg's queue, if it waits there (not while its
   * connection is being made): kept, the pool would count it in `waitingCount`
   * (`sessionmux_db_waiting`) until a connection came for it, which an ending pool hands none, and
   * hold its statement's parameters as long.
   */
  #unqueue(connected: Connected): void {
    const queue = (this as unknown as { _pendingQueue?: { callback: unknown }[] })._pendingQueue;
    const at = queue?.findIndex((item) => item.callback === connected) ?? -1;
    if (at >= 0) queue?.splice(at, 1);
  }

  override end(): Promise<void>;
  override end(callback: () => void): void;
  override end(callback?: () => void): Promise<void> | undefined {
    // each one refused leaves pg's queue too (see `#unqueue`)
    this.#waiting.refuse(storeClosed);
    if (!callback) return super.end();
    super.end(callback);
    return undefined;
  }
}

/**
 * A pool whose every connection runs in the store's schema with `synchronous_commit = on`, so a
 * COMMIT returns only after the WAL reached disk: an acknowledged write survives a crash. Each has
 * TCP keepalive, as the LISTEN connections do: one whose path went silent while it idled in the
 * pool (or held the group commit's presence lock) is found by the kernel's probes and dropped,
 * instead of by the next statement sent over it. Its end refuses the connects still waiting on it
 * (see `EndingPool`).
 */
export function openPool(url: string, options: PgPoolOptions = {}): pg.Pool {
  const schema = schemaIdentifier(options.schema ?? "public");
  const pool = new EndingPool({
    connectionString: url,
    max: options.max ?? 10,
    pipeline: options.pipeline ?? false,
    idleTimeoutMillis: options.idleTimeoutMillis ?? 10_000,
    types,
    options: sessionSettings(schema),
    application_name: "sessionmux",
    keepAlive: true,
    keepAliveInitialDelayMillis: KEEPALIVE_IDLE_MS,
    // the client's own connect timeout, not the pool's (which also bounds the wait for a free one)
    ...(options.connectTimeoutMs ? { Client: boundedConnects(options.connectTimeoutMs) } : {}),
  });
  // A connection that ends while checked out between two queries (the server ended an idle
  // transaction, restarted, or the network dropped) emits `error` with no query to fail: without a
  // listener that would end the process. Its next query rejects instead, and the pool drops it on
  // release because it is no longer queryable.
  pool.on("connect", (client) => {
    client.on("error", () => undefined);
    // once per statement answered, not per row
    client.connection.on("readyForQuery", () => answers.set(client, (answers.get(client) ?? 0) + 1));
  });
  pool.on("release", (_err, client) => handedBack.add(client));
  return pool;
}

/** Connections of the pools `openPool` made that went back to their pool at least once. */
const handedBack = new WeakSet<pg.ClientBase>();

/** The statements the server finished answering on each connection of the pools `openPool` made. */
const answers = new WeakMap<pg.ClientBase, number>();

/**
 * How many statements the server finished answering on `client` so far (its ReadyForQuery):
 * unchanged between two readings, no statement sent on it in between was answered whole, so the
 * connection may have been dead since before they went out (see `lostWhileIdle`).
 */
export function answersOn(client: pg.ClientBase): number {
  return answers.get(client) ?? 0;
}

/**
 * Whether `client` was handed out before and went back to its pool since, where it may have sat
 * idle (see `readOn`): false for a connection made for the statement now sent on it.
 */
export function wasIdleInPool(client: pg.ClientBase): boolean {
  return handedBack.has(client);
}

/**
 * A client class whose handshake fails once it took `ms` of the event loop's time (see
 * `afterLoopTime`), as pg's `connectionTimeoutMillis` fails it. That one is a plain timer: after a
 * loop held past `ms` it fires before the server's answer, or the socket's connect, is read, so
 * the host's own stall failed a healthy connection and the statement waiting on it.
 */
function boundedConnects(ms: number): new () => pg.Client {
  return class extends pg.Client {
    // both of pg's overloads: the promise, and the callback the pool passes
    override connect(): Promise<pg.Client>;
    override connect(callback: (err: Error | null, client?: pg.Client) => void): void;
    override connect(
      callback?: (err: Error | null, client?: pg.Client) => void,
    ): Promise<pg.Client> | undefined {
      const { connection } = this as unknown as {
        connection: { _ending: boolean; stream: { destroy(err: Error): void } };
      };
      // as pg's own timeout does: the connection counts as ending, so the destroyed socket's
      // error fails the connect rather than reaching the client as news
      const cancel = afterLoopTime(ms, () => {
        connection._ending = true;
        connection.stream.destroy(new Error("timeout expired"));
      });
      if (!callback) return super.connect().finally(cancel);
      super.connect(((err: Error | null, client?: pg.Client) => {
        cancel();
        callback(err, client);
      }) as (err: Error) => void);
      return undefined;
    }
  };
}

/** A pool's connections now, as `/metrics` serves them. */
export function poolStatsOf(pool: pg.Pool): PoolStats {
  return { total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount };
}

/**
 * A single connection with the same settings, for LISTEN (it must stay out of the pool), named
 * `name` (`sessionmux-feed` or `sessionmux-calls`) in `pg_stat_activity`, asked `SELECT 1` every
 * `listenCheckMs` (see `checkListening`): one that goes silent ends with an error as a closed
 * one does, and TCP keepalive probes it when idle.
 */
export function openClient(
  url: string,
  name: string,
  options: PgPoolOptions & { listenCheckMs?: number } = {},
): pg.Client {
  const schema = schemaIdentifier(options.schema ?? "public");
  const client = new pg.Client({
    connectionString: url,
    types,
    options: sessionSettings(schema),
    application_name: name,
    keepAlive: true,
    keepAliveInitialDelayMillis: KEEPALIVE_IDLE_MS,
  });
  checkListening(client, options.listenCheckMs ?? LISTEN_CHECK_MS);
  return client;
}
