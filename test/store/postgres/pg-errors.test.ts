import { randomBytes } from "node:crypto";
import net from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SessionmuxError } from "../../../protocol/index.js";
import {
  isPgConnectionLost,
  isPgRetryable,
  isPgStorageFailure,
  isStaleKeptState,
  pgPersistenceFailure,
} from "../../../src/store/postgres/pg-errors.js";
import { pgUrl } from "../contract/backends.js";

/**
 * How the PostgreSQL store tells its failures apart, on errors PostgreSQL and its client really
 * raise: a storage failure fails the whole batch with `persistence_failure` (the caller retries
 * later), a lost race runs the transaction again, kept states the database refused send the batch
 * the usual way, and any other fault is one operation's own (the batch is re-run one by one, so
 * only that caller sees it, as the database said it).
 */
describe.skipIf(!pgUrl)("PostgreSQL failures as the store sorts them", () => {
  let db: pg.Client;
  const schema = `smx_errors_${randomBytes(4).toString("hex")}`;

  beforeAll(async () => {
    db = new pg.Client({ connectionString: pgUrl! });
    await db.connect();
    await db.query(`CREATE SCHEMA "${schema}"`);
    await db.query(`SET search_path = "${schema}"`);
    // a log table named as the store's, so its key is `events_pkey`, beside another unique key
    await db.query(
      `CREATE TABLE events (session_id text, seq int, tag text UNIQUE, PRIMARY KEY (session_id, seq))`,
    );
    await db.query(`CREATE TABLE other (id int PRIMARY KEY)`);
  });

  afterAll(async () => {
    await db.query(`DROP SCHEMA "${schema}" CASCADE`);
    await db.end();
  });

  /** The error PostgreSQL raises for a statement failing with `sqlstate`. */
  async function raised(sqlstate: string): Promise<unknown> {
    const err = await db
      .query(`DO $$ BEGIN RAISE EXCEPTION 'injected' USING ERRCODE = '${sqlstate}'; END $$`)
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(err).toMatchObject({ code: sqlstate });
    return err;
  }

  async function failed(sql: string, client: pg.Client = db): Promise<unknown> {
    const err = await client.query(sql).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(Error);
    return err;
  }

  // connection lost, out of resources, operator intervention (shutdown, cancel), system error,
  // internal error, and a read-only standby refusing the write
  it.each(["08006", "08003", "53100", "53200", "57P01", "57014", "58030", "XX000", "25006"])(
    "SQLSTATE %s is the database failing its part: a storage failure, not a race",
    async (sqlstate) => {
      const err = await raised(sqlstate);
      expect(isPgStorageFailure(err)).toBe(true);
      expect(isPgRetryable(err)).toBe(false);
    },
  );

  // one operation's data or statement: a unique or check violation, a value too long, a missing
  // table, an error raised by a function, another state of the read-only class 25
  it.each(["23505", "23514", "22001", "42P01", "P0001", "25001", "40002", "0A000"])(
    "SQLSTATE %s is a fault of one operation: neither a storage failure nor a race",
    async (sqlstate) => {
      const err = await raised(sqlstate);
      expect(isPgStorageFailure(err)).toBe(false);
      expect(isPgRetryable(err)).toBe(false);
    },
  );

  it.each(["40001", "40P01"])(
    "SQLSTATE %s is a lost race, run again, not a storage failure",
    async (sqlstate) => {
      const err = await raised(sqlstate);
      expect(isPgRetryable(err)).toBe(true);
      expect(isPgStorageFailure(err)).toBe(false);
    },
  );

  it("a connection the server ended, one closed, one refused, and a read that timed out are storage failures", async () => {
    // a server that takes the connection and ends it before answering: the socket ends under
    // the client, as when the network or the server goes away mid-query
    const hangUp = net.createServer((socket) => socket.destroy());
    await new Promise<void>((resolve) => hangUp.listen(0, "127.0.0.1", resolve));
    const hangUpUrl = new URL(pgUrl!);
    hangUpUrl.host = `127.0.0.1:${(hangUp.address() as net.AddressInfo).port}`;
    const terminated = await new pg.Client({ connectionString: hangUpUrl.toString() }).connect().then(
      () => undefined,
      (e: unknown) => e,
    );
    await new Promise((resolve) => hangUp.close(resolve));
    expect((terminated as Error).message).toBe("Connection terminated unexpectedly");
    expect(isPgStorageFailure(terminated)).toBe(true);

    const closed = new pg.Client({ connectionString: pgUrl! });
    await closed.connect();
    await closed.end();
    const notQueryable = await failed("SELECT 1", closed);
    expect((notQueryable as Error).message).toMatch(/not queryable/);
    expect(isPgStorageFailure(notQueryable)).toBe(true);

    // a port nothing listens on: the socket's own error code
    const refusedUrl = new URL(pgUrl!);
    refusedUrl.port = "1";
    const refused = await new pg.Client({ connectionString: refusedUrl.toString() }).connect().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(refused).toMatchObject({ code: "ECONNREFUSED" });
    expect(isPgStorageFailure(refused)).toBe(true);

    const slow = new pg.Client({ connectionString: pgUrl!, query_timeout: 50 });
    await slow.connect();
    try {
      const timedOut = await failed("SELECT pg_sleep(2)", slow);
      expect((timedOut as Error).message).toMatch(/timeout/);
      expect(isPgStorageFailure(timedOut)).toBe(true);
    } finally {
      await slow.end().catch(() => undefined);
    }
    for (const err of [terminated, notQueryable, refused]) expect(isPgRetryable(err)).toBe(false);
  });

  it("a write to a connection already cut (EPIPE: five letters, as a SQLSTATE has) is a storage failure", () => {
    // as node raises it for a pipelined write batch's statements sent over a socket its peer
    // reset: the system call's error, which no SQLSTATE class names
    const epipe = Object.assign(new Error("write EPIPE"), { errno: -32, code: "EPIPE", syscall: "write" });
    expect(isPgStorageFailure(epipe)).toBe(true);
    expect(isPgRetryable(epipe)).toBe(false);
    expect(pgPersistenceFailure(epipe)).toMatchObject({ code: "persistence_failure", retryable: true });
  });

  it("a lost connection is one the server did not answer: a socket's error or pg's own, never a SQLSTATE", async () => {
    const victim = new pg.Client({ connectionString: pgUrl! });
    victim.on("error", () => undefined);
    await victim.connect();
    const pid = (await victim.query<{ pid: number }>("SELECT pg_backend_pid() AS pid")).rows[0]!.pid;
    const sleeping = failed("SELECT pg_sleep(5)", victim);
    await expect
      .poll(
        async () =>
          (await db.query("SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND wait_event = 'PgSleep'", [pid]))
            .rowCount,
      )
      .toBe(1);
    await db.query("SELECT pg_terminate_backend($1)", [pid]);
    // the server ended it, and said so: FATAL 57P01, a storage failure it answered
    const ended = await sleeping;
    expect(ended).toMatchObject({ code: "57P01" });
    expect(isPgStorageFailure(ended)).toBe(true);
    expect(isPgConnectionLost(ended)).toBe(false);
    await victim.end().catch(() => undefined);

    const reset = Object.assign(new Error("read ECONNRESET"), {
      errno: -104,
      code: "ECONNRESET",
      syscall: "read",
    });
    const epipe = Object.assign(new Error("write EPIPE"), { errno: -32, code: "EPIPE", syscall: "write" });
    for (const err of [reset, epipe, new Error("Connection terminated unexpectedly")]) {
      expect(isPgConnectionLost(err)).toBe(true);
    }
    expect(isPgConnectionLost(await failed("SELECT 1/0"))).toBe(false);
    expect(isPgConnectionLost(new TypeError("cannot read properties of undefined"))).toBe(false);
  });

  it("a program's own error, or a thrown value that is not an error, is no storage failure", async () => {
    expect(isPgStorageFailure(new TypeError("cannot read properties of undefined"))).toBe(false);
    // a cancelled wait carries a code of node's own, not a socket's
    const aborted = await sleep(1, undefined, { signal: AbortSignal.abort() }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(aborted).toMatchObject({ code: "ABORT_ERR" });
    expect(isPgStorageFailure(aborted)).toBe(false);
    expect(isPgStorageFailure(new RangeError("Invalid array length"))).toBe(false);
    // node's own errors (ERR_…) are the program's, though their code starts with E as a socket's does
    const nodeError = (() => {
      try {
        return new URL("not a url");
      } catch (e) {
        return e;
      }
    })();
    expect(nodeError).toMatchObject({ code: "ERR_INVALID_URL" });
    expect(isPgStorageFailure(nodeError)).toBe(false);
    // the words of a lost connection, but no error: nothing the client or the socket raised
    expect(isPgStorageFailure({ message: "Connection terminated unexpectedly" })).toBe(false);
    for (const value of [undefined, null, "timeout", 57]) {
      expect(isPgStorageFailure(value)).toBe(false);
      expect(isPgRetryable(value)).toBe(false);
      expect(isStaleKeptState(value)).toBe(false);
    }
    // a code that is not a string is no SQLSTATE
    expect(isPgRetryable({ code: 40001 })).toBe(false);
  });

  it("the log's key refusing a seq, or the kept-state check, means the kept states were stale; other keys do not", async () => {
    await db.query(`INSERT INTO events VALUES ('s', 1, 'one')`);
    const sameSeq = await failed(`INSERT INTO events VALUES ('s', 1, 'two')`);
    expect(sameSeq).toMatchObject({ code: "23505", constraint: "events_pkey" });
    expect(isStaleKeptState(sameSeq)).toBe(true);

    const sameTag = await failed(`INSERT INTO events VALUES ('s', 2, 'one')`);
    expect(sameTag).toMatchObject({ code: "23505", constraint: "events_tag_key" });
    expect(isStaleKeptState(sameTag)).toBe(false);

    await db.query(`INSERT INTO other VALUES (1)`);
    const otherKey = await failed(`INSERT INTO other VALUES (1)`);
    expect(otherKey).toMatchObject({ code: "23505", constraint: "other_pkey" });
    expect(isStaleKeptState(otherKey)).toBe(false);

    // the check of the kept heads raises its own SQLSTATE
    expect(isStaleKeptState(await raised("SMX01"))).toBe(true);
    // a constraint of that name failing some other way is not the key refusing a seq
    expect(isStaleKeptState({ code: "23503", constraint: "events_pkey" })).toBe(false);
    expect(isStaleKeptState(await raised("40001"))).toBe(false);
  });

  it("a storage failure reaches the caller as persistence_failure with the database's code and the error as its cause", async () => {
    const err = await raised("53100");
    const failure = pgPersistenceFailure(err);
    expect(failure).toBeInstanceOf(SessionmuxError);
    expect(failure).toMatchObject({
      code: "persistence_failure",
      retryable: true,
      message: "the session store could not write; retry later",
      data: { postgres: "53100" },
    });
    expect(failure.cause).toBe(err);

    const lostSocket = Object.assign(new Error("read ECONNRESET"), { code: "ECONNRESET" });
    expect(pgPersistenceFailure(lostSocket).data).toEqual({ postgres: "ECONNRESET" });
    // an error with no code carries no data
    const terminated = new Error("Connection terminated unexpectedly");
    expect(pgPersistenceFailure(terminated).data).toBeUndefined();
    expect(pgPersistenceFailure(terminated).cause).toBe(terminated);
    expect(pgPersistenceFailure(undefined).data).toBeUndefined();
  });
});
