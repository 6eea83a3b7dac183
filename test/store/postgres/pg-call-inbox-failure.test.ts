import { randomBytes } from "node:crypto";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { SessionmuxError } from "../../../protocol/index.js";
import { PgCallInbox } from "../../../src/store/postgres/pg-call-inbox.js";
import { cleanupsAfterEach } from "../../support/cleanups.js";
import { startTcpProxy, type TcpProxy } from "../../support/tcp-proxy.js";
import { dropSchema, pgUrl } from "../contract/backends.js";
import { call, NO_POLL } from "./call-inbox-rows.js";
import { waitingOn } from "./held-writes.js";

/**
 * A forwarded call whose database connection fails under it. Certainly not recorded (no
 * connection, or the statement refused): `persistence_failure`, which the client may send again.
 * Maybe recorded (the connection lost once its INSERT went out, or after it was recorded): its
 * target may run it, so `outcome_unknown`, never a retryable code, which would have it run twice.
 */

const cleanups = cleanupsAfterEach();

/** An inbox reaching the database through a proxy the test can cut or stop; nobody serves `host-b`. */
async function inboxBehindProxy(): Promise<{
  inbox: PgCallInbox;
  proxy: TcpProxy;
  schema: string;
  admin: pg.Client;
}> {
  const url = new URL(pgUrl!);
  const proxy = await startTcpProxy(Number(url.port || 5432));
  cleanups.push(() => proxy.stop());
  url.hostname = "127.0.0.1";
  url.port = String(proxy.port);
  const schema = `inbox_failure_${randomBytes(4).toString("hex")}`;
  cleanups.push(() => dropSchema(pgUrl!, schema));
  const inbox = await PgCallInbox.open(url.toString(), {
    schema,
    pollMs: NO_POLL,
    maxConnections: 1,
    listenCheckMs: 600_000,
    queryCheckMs: 300,
  });
  cleanups.push(() => inbox.close());
  const admin = new pg.Client({ connectionString: pgUrl! });
  await admin.connect();
  cleanups.push(() => admin.end());
  return { inbox, proxy, schema, admin };
}

/** The code a send rejected with, and the message of the error under it; `untyped` when it was not a typed error. */
async function failure(sent: Promise<unknown>): Promise<unknown> {
  const err = await sent.then(
    (outcome) => ({ answered: outcome }),
    (error: unknown) => error,
  );
  if (!(err instanceof SessionmuxError)) return { untyped: err instanceof Error ? err.message : err };
  return { code: err.code, retryable: err.retryable, cause: (err.cause as Error | undefined)?.message };
}

async function rowsOf(admin: pg.Client, schema: string, callId: string): Promise<number> {
  const { rows } = await admin.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM "${schema}".forwarded_calls WHERE call_id = $1`,
    [callId],
  );
  return rows[0]!.n;
}

/** Holds the inbox's table, and resolves the backend of the first statement that waits on it. */
async function holdTable(admin: pg.Client, schema: string): Promise<() => Promise<number>> {
  await admin.query("BEGIN");
  await admin.query(`LOCK TABLE "${schema}".forwarded_calls IN ACCESS EXCLUSIVE MODE`);
  const { rows } = await admin.query<{ pid: number }>("SELECT pg_backend_pid() AS pid");
  const waiting = async () => (await waitingOn(admin, rows[0]!.pid)).map(({ pid }) => pid);
  return async () => {
    await expect.poll(waiting, { timeout: 10_000 }).toHaveLength(1);
    return (await waiting())[0]!;
  };
}

describe.skipIf(!pgUrl)("PostgreSQL call inbox: a call whose connection fails", () => {
  it("is persistence_failure (retryable) when no connection can be had: nothing was recorded", async () => {
    const { inbox, proxy, schema, admin } = await inboxBehindProxy();
    await proxy.stop();
    // the pool's idle connection is gone with the proxy: the call needs a new one, refused
    await expect.poll(() => inbox.poolStats().total, { timeout: 10_000 }).toBe(0);
    const forwarded = call("s1");
    expect(await failure(inbox.send("host-b", forwarded, 600_000))).toEqual({
      code: "persistence_failure",
      retryable: true,
      cause: expect.stringMatching(/ECONNREFUSED/),
    });
    expect(await rowsOf(admin, schema, forwarded.callId)).toBe(0);
  }, 30_000);

  it("is persistence_failure when the server refuses the INSERT (an ERROR ends its transaction)", async () => {
    const { inbox, schema, admin } = await inboxBehindProxy();
    const waiter = await holdTable(admin, schema);
    const forwarded = call("s1");
    const sent = failure(inbox.send("host-b", forwarded, 600_000));
    // the INSERT waits on the lock, and is cancelled there: 57014, an ERROR
    await admin.query("SELECT pg_cancel_backend($1)", [await waiter()]);
    expect(await sent).toEqual({
      code: "persistence_failure",
      retryable: true,
      cause: expect.stringMatching(/canceling statement/),
    });
    await admin.query("COMMIT");
    expect(await rowsOf(admin, schema, forwarded.callId)).toBe(0);
  }, 30_000);

  it("is outcome_unknown when the connection is lost once the INSERT went out: the row may be written", async () => {
    const { inbox, proxy, schema, admin } = await inboxBehindProxy();
    // the pool's idle connection goes, so the INSERT goes out on one made for it (one that had
    // idled may have died so before it was sent: the INSERT would go again, see below)
    proxy.cutAll();
    await expect.poll(() => inbox.poolStats().total, { timeout: 10_000 }).toBe(0);
    const waiter = await holdTable(admin, schema);
    const forwarded = call("s1");
    const sent = failure(inbox.send("host-b", forwarded, 600_000));
    await waiter();
    // the connection drops with the INSERT in the server's hands
    proxy.cutAll();
    expect(await sent).toEqual({
      code: "outcome_unknown",
      retryable: false,
      cause: expect.stringMatching(/connection terminated/i),
    });
    // and the server goes on with it: the call is recorded, for its target to run
    await admin.query("COMMIT");
    await expect.poll(() => rowsOf(admin, schema, forwarded.callId), { timeout: 10_000 }).toBe(1);
  }, 30_000);

  it("sends the INSERT again when the connection it went out on had idled: recorded once, though the first reached the server", async () => {
    const { inbox, proxy, schema, admin } = await inboxBehindProxy();
    const waiter = await holdTable(admin, schema);
    const holder = (await admin.query<{ pid: number }>("SELECT pg_backend_pid() AS pid")).rows[0]!.pid;
    const forwarded = call("s1");
    const withdraw = new AbortController();
    const sent = inbox.send("host-b", forwarded, 600_000, withdraw.signal);
    await waiter();
    // the idle connection the INSERT went out on drops with it in the server's hands: the host
    // cannot tell that from one that died while idle, and sends it again on a new connection
    proxy.cutAll();
    await expect.poll(async () => (await waitingOn(admin, holder)).length, { timeout: 10_000 }).toBe(2);
    // the server goes on with both: the second finds the first's row and writes nothing
    await admin.query("COMMIT");
    await expect.poll(() => rowsOf(admin, schema, forwarded.callId), { timeout: 10_000 }).toBe(1);
    // recorded, so waited on: taken back unclaimed once withdrawn
    withdraw.abort();
    expect(await sent).toEqual({ status: "withdrawn" });
    expect(await rowsOf(admin, schema, forwarded.callId)).toBe(0);
  }, 30_000);

  it("is outcome_unknown when the database is lost after the call was recorded", async () => {
    const { inbox, proxy, schema, admin } = await inboxBehindProxy();
    const forwarded = call("s1");
    const withdraw = new AbortController();
    const sent = failure(inbox.send("host-b", forwarded, 600_000, withdraw.signal));
    await expect.poll(() => rowsOf(admin, schema, forwarded.callId), { timeout: 10_000 }).toBe(1);
    await proxy.stop();
    await expect.poll(() => inbox.poolStats().total, { timeout: 10_000 }).toBe(0);
    // taking the call back needs the database
    withdraw.abort();
    expect(await sent).toEqual({
      code: "outcome_unknown",
      retryable: false,
      cause: expect.stringMatching(/ECONNREFUSED/),
    });
    expect(await rowsOf(admin, schema, forwarded.callId)).toBe(1);
  }, 30_000);

  it("answers a call whose reply's first write goes out on a connection cut while the call ran", async () => {
    const { inbox: target, proxy, schema } = await inboxBehindProxy();
    const sender = await PgCallInbox.open(pgUrl!, { schema, pollMs: NO_POLL, claimedWaitMs: 5_000 });
    cleanups.push(() => sender.close());
    let cuts = 0;
    target.serve("host-b", async () => {
      // the path blips as the call runs: the connection its claim used, idle in the pool since,
      // is gone, and the reply's write is the first statement to meet it
      cuts = proxy.cutAll();
      return { status: "ok", result: "answered" };
    });
    // without the write sent again the reply is lost: the sender waits out its claimed wait, `unknown`
    expect(await sender.send("host-b", call("s1"), 5_000)).toEqual({ status: "ok", result: "answered" });
    expect(cuts).toBeGreaterThan(0);
  }, 30_000);
});
