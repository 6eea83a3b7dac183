import { randomBytes, randomUUID } from "node:crypto";
import pg from "pg";
import { afterEach, describe, expect, it, vi } from "vitest";
import { PgCallInbox } from "../../../src/store/postgres/pg-call-inbox.js";
import { startTcpProxy } from "../../support/tcp-proxy.js";
import { dropSchema, pgUrl } from "../contract/backends.js";
import { call, NO_POLL } from "./call-inbox-rows.js";
import { aroundListenConnects, gateListenConnects, listenClientsMade } from "./listen-connects.js";
import { refusableRole } from "./refusable-role.js";

/**
 * The inbox's connections: cut by the database, a LISTEN connection comes back and an idle pooled
 * one is dropped without harm; once closed, none is left, not even one a reconnect was making.
 */

afterEach(() => {
  vi.restoreAllMocks();
});

/** Counts the LISTEN connects that fail from now on. */
function failedListenConnects(): { count: number } {
  const failed = { count: 0 };
  aroundListenConnects((_client, connect) => {
    const made = connect();
    made.catch(() => {
      failed.count++;
    });
    return made;
  });
  return failed;
}

/** `b` serves as a role the test can lock out; `a`, the database's own user, sends to it. */
/** Waits (5 s at most, half the pool's idle timeout) until `role` has no connection open. */
async function noConnectionsLeft(admin: pg.Client, role: string): Promise<void> {
  const count = async () =>
    (
      await admin.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_stat_activity WHERE usename = $1", [
        role,
      ])
    ).rows[0]!.n;
  await expect.poll(count, { timeout: 5_000 }).toBe(0);
}

async function refusableInboxes(bOptions: { pollMs: number }) {
  const refusable = await refusableRole("smx_inbox");
  const admin = new pg.Client({ connectionString: pgUrl! });
  const opened: PgCallInbox[] = [];
  const close = async () => {
    for (const inbox of opened) await inbox.close();
    await admin.end();
    await refusable.drop();
  };
  try {
    await admin.connect();
    // the role creates the schema's tables; `a`, a superuser, then finds them there
    const b = await PgCallInbox.open(refusable.url, { schema: refusable.schema, ...bOptions });
    opened.push(b);
    const a = await PgCallInbox.open(pgUrl!, { schema: refusable.schema, pollMs: NO_POLL });
    opened.push(a);
    /** The role's (b's) open connections: all, or those of one kind. */
    const connections = async (kind?: "pooled" | "listen") =>
      (
        await admin.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE usename = $1
             AND ($2::text IS NULL OR application_name = $2)`,
          [refusable.role, kind === undefined ? null : kind === "listen" ? "sessionmux-calls" : "sessionmux"],
        )
      ).rows[0]!.n;
    /** Resolves once b's poll has run at least ten times since the call (it deletes an old expired row). */
    const tenPolls = async () => {
      const id = `expired-${randomUUID()}`;
      await admin.query(
        `INSERT INTO "${refusable.schema}".forwarded_calls (call_id, target_host, from_host, session_id, body, expires_at)
         VALUES ($1, 'host-gone', 'host-a', 's', '\x80', clock_timestamp() - interval '2 minutes')`,
        [id],
      );
      await expect
        .poll(
          async () =>
            (
              await admin.query(`SELECT 1 FROM "${refusable.schema}".forwarded_calls WHERE call_id = $1`, [
                id,
              ])
            ).rows.length,
          { timeout: 20_000 },
        )
        .toBe(0);
    };
    return { a, b, refusable, connections, tenPolls, close };
  } catch (error) {
    await close();
    throw error;
  }
}

describe.skipIf(!pgUrl)("PostgreSQL call inbox: connections", () => {
  it("connections cut by the database: the process stays up, LISTEN comes back, calls go on", async () => {
    const { a, b, refusable, close } = await refusableInboxes({ pollMs: 50 });
    try {
      b.serve("host-b", async () => ({ status: "ok", result: "served" }));
      expect(await a.send("host-b", call("s1"), 600_000)).toEqual({ status: "ok", result: "served" });
      // the pooled connection that served is idle now: cutting it must not crash the process
      const refused = failedListenConnects();
      await refusable.lockOut();
      // the database stays closed to it for more than one reconnect attempt
      await expect.poll(() => refused.count, { timeout: 20_000 }).toBeGreaterThan(1);
      await refusable.letIn();
      await expect.poll(() => refusable.listening(), { timeout: 20_000 }).toBe(true);
      expect(await a.send("host-b", call("s2"), 600_000)).toEqual({ status: "ok", result: "served" });
    } finally {
      await close();
    }
  });

  it("a closed inbox leaves no connection of its own open", async () => {
    const { b, refusable, connections, close } = await refusableInboxes({ pollMs: 50 });
    try {
      b.serve("host-b", async () => ({ status: "ok", result: null }));
      expect(await refusable.listening()).toBe(true);
      expect(await connections()).toBeGreaterThan(1);
      await b.close();
      // an idle pooled connection left behind would linger until the pool's idle timeout (10 s)
      await expect.poll(() => connections(), { timeout: 5_000 }).toBe(0);
    } finally {
      await close();
    }
  });

  it("close ends a LISTEN connection a reconnect was still making", async () => {
    const { b, refusable, connections, close } = await refusableInboxes({ pollMs: 50 });
    try {
      const { openConnects, connecting } = gateListenConnects();
      await refusable.lockOut();
      await refusable.letIn();
      await expect.poll(() => connecting.length, { timeout: 20_000 }).toBeGreaterThan(0);
      await b.close();
      openConnects();
      await Promise.allSettled(connecting);
      await expect.poll(() => connections(), { timeout: 20_000 }).toBe(0);
    } finally {
      await close();
    }
  });

  it("a LISTEN connection that ends quietly comes back at the next poll; a late end of the old one leaves the new one alone", async () => {
    const made = listenClientsMade();
    const { a, b, refusable, connections, tenPolls, close } = await refusableInboxes({ pollMs: 20 });
    try {
      b.serve("host-b", async () => ({ status: "ok", result: "served" }));
      const [old] = made.filter((client) => client.user === refusable.role);
      // ended with no error first, as a connection closed on purpose elsewhere would be
      await old!.end();
      await expect.poll(() => refusable.listening(), { timeout: 20_000 }).toBe(true);
      expect(await a.send("host-b", call("s1"), 600_000)).toEqual({ status: "ok", result: "served" });
      // the old connection's end reported once more, after the new one is up (as a driver that
      // reports it late would): the new one stays the inbox's, and no third one is made
      old!.emit("end");
      await tenPolls();
      expect(await connections("listen")).toBe(1);
      await b.close();
      await expect.poll(() => connections(), { timeout: 5_000 }).toBe(0);
    } finally {
      await close();
    }
  });

  it("a listening inbox opens no second LISTEN connection, poll after poll", async () => {
    const { connections, tenPolls, close } = await refusableInboxes({ pollMs: 20 });
    try {
      await tenPolls();
      expect(await connections("listen")).toBe(1);
    } finally {
      await close();
    }
  });

  it("while a reconnect is under way the polls start no other", async () => {
    const { refusable, tenPolls, close } = await refusableInboxes({ pollMs: 20 });
    const { openConnects, connecting } = gateListenConnects();
    try {
      await refusable.lockOut();
      await refusable.letIn();
      await expect.poll(() => connecting.length, { timeout: 20_000 }).toBeGreaterThan(0);
      await tenPolls();
      expect(connecting.length).toBe(1);
    } finally {
      openConnects();
      await Promise.allSettled(connecting);
      await close();
    }
  });

  it("an inbox keeps at most three pooled connections unless told otherwise", async () => {
    const { b, connections, refusable, close } = await refusableInboxes({ pollMs: NO_POLL });
    try {
      // b, the role's inbox, sends here: eight statements at once ask its pool for eight connections
      const sent = Array.from({ length: 8 }, (_, n) => b.send("host-gone", call(`s${n}`), 600_000));
      const admin = new pg.Client({ connectionString: pgUrl! });
      await admin.connect();
      try {
        await expect
          .poll(
            async () =>
              Number(
                (
                  await admin.query<{ n: string }>(
                    `SELECT count(*) AS n FROM "${refusable.schema}".forwarded_calls`,
                  )
                ).rows[0]?.n,
              ),
            { timeout: 20_000 },
          )
          .toBe(8);
      } finally {
        await admin.end();
      }
      const pooled = await connections("pooled");
      expect(pooled).toBeGreaterThan(0);
      expect(pooled).toBeLessThanOrEqual(3);
      await b.close();
      expect((await Promise.all(sent)).every((o) => o.status === "timeout")).toBe(true);
    } finally {
      await close();
    }
  });

  it("open refuses a schema newer than this build and leaves no connection open", async () => {
    const refusable = await refusableRole("smx_inbox");
    const admin = new pg.Client({ connectionString: pgUrl! });
    await admin.connect();
    try {
      const first = await PgCallInbox.open(refusable.url, { schema: refusable.schema, pollMs: NO_POLL });
      await first.close();
      await admin.query(`INSERT INTO "${refusable.schema}".schema_migrations (version) VALUES (100000)`);
      await expect(
        PgCallInbox.open(refusable.url, { schema: refusable.schema, pollMs: NO_POLL }),
      ).rejects.toThrow(/newer than this build/);
      // a pooled connection left behind would linger until the pool's idle timeout (10 s)
      await noConnectionsLeft(admin, refusable.role);
    } finally {
      await admin.end();
      await refusable.drop();
    }
  });

  it("a poll while open is still making its LISTEN connection starts no second one", async () => {
    const refusable = await refusableRole("smx_inbox");
    const admin = new pg.Client({ connectionString: pgUrl! });
    await admin.connect();
    let opening: Promise<PgCallInbox> | undefined;
    let openConnects = () => {};
    try {
      // the tables first, so the polls of the inbox being opened can delete an expired row
      const first = await PgCallInbox.open(refusable.url, { schema: refusable.schema, pollMs: NO_POLL });
      await first.close();
      const expired = `expired-${randomUUID()}`;
      await admin.query(
        `INSERT INTO "${refusable.schema}".forwarded_calls (call_id, target_host, from_host, session_id, body, expires_at)
         VALUES ($1, 'host-gone', 'host-a', 's', '\x80', clock_timestamp() - interval '2 minutes')`,
        [expired],
      );
      const gate = gateListenConnects();
      openConnects = gate.openConnects;
      const { connecting } = gate;
      opening = PgCallInbox.open(refusable.url, { schema: refusable.schema, pollMs: 20 });
      await expect.poll(() => connecting.length, { timeout: 20_000 }).toBe(1);
      // ten polls ran while open waited for its LISTEN connection
      await expect
        .poll(
          async () =>
            (
              await admin.query(`SELECT 1 FROM "${refusable.schema}".forwarded_calls WHERE call_id = $1`, [
                expired,
              ])
            ).rows.length,
          { timeout: 20_000 },
        )
        .toBe(0);
      expect(connecting.length).toBe(1);
    } finally {
      openConnects();
      await (await opening)?.close();
      await admin.end();
      await refusable.drop();
    }
  });

  it("an open that fails to listen leaves nothing running: no connection, no poll reconnecting", async () => {
    const refusable = await refusableRole("smx_inbox");
    const admin = new pg.Client({ connectionString: pgUrl! });
    await admin.connect();
    try {
      let refused = 0;
      aroundListenConnects((_client, connect) =>
        refused++ === 0 ? Promise.reject(new Error("too many connections")) : connect(),
      );
      await expect(PgCallInbox.open(refusable.url, { schema: refusable.schema, pollMs: 20 })).rejects.toThrow(
        "too many connections",
      );
      // a pooled connection left behind would linger until the pool's idle timeout (10 s); a poll
      // still running would have made a LISTEN connection of its own by then
      await noConnectionsLeft(admin, refusable.role);
      expect(refused).toBe(1);
    } finally {
      await admin.end();
      await refusable.drop();
    }
  });

  it("an idle pooled connection cut by the database does not bring the process down", async () => {
    // no poll: nothing uses b's pool when its connections are cut, so the pooled one is idle
    const { a, b, refusable, connections, close } = await refusableInboxes({ pollMs: NO_POLL });
    try {
      b.serve("host-b", async () => ({ status: "ok", result: "served" }));
      expect(await a.send("host-b", call("s1"), 600_000)).toEqual({ status: "ok", result: "served" });
      expect(await connections("pooled")).toBeGreaterThan(0);
      // an error nobody listens for would fail this run as an unhandled error
      await refusable.lockOut();
      await expect.poll(() => connections(), { timeout: 20_000 }).toBe(0);
      await refusable.letIn();
      const again = await PgCallInbox.open(refusable.url, { schema: refusable.schema, pollMs: NO_POLL });
      await again.close();
    } finally {
      await close();
    }
  });

  /** The inbox's LISTEN connection, by the `application_name` its startup message names. */
  const inboxListen = (opening: Buffer) => opening.includes("sessionmux-calls");

  it("a LISTEN connection whose network path goes silent is dropped by its check, and made again at the next poll", async () => {
    const url = new URL(pgUrl!);
    const proxy = await startTcpProxy(Number(url.port || 5432));
    url.hostname = "127.0.0.1";
    url.port = String(proxy.port);
    const schema = `inbox_silent_${randomBytes(4).toString("hex")}`;
    const opened: PgCallInbox[] = [];
    try {
      const a = await PgCallInbox.open(pgUrl!, { schema, pollMs: NO_POLL });
      opened.push(a);
      const b = await PgCallInbox.open(url.toString(), { schema, pollMs: 100, listenCheckMs: 300 });
      opened.push(b);
      b.serve("host-b", async () => ({ status: "ok", result: "served" }));
      await expect.poll(() => proxy.forwarding(inboxListen), { timeout: 20_000 }).toBe(1);
      expect(proxy.silenceAll(inboxListen)).toBeGreaterThanOrEqual(1);
      // the silent connection's socket is destroyed (the proxy sees it close), not kept for hours
      await expect.poll(() => proxy.silenced, { timeout: 20_000 }).toBe(0);
      // and a new one made in its place
      await expect.poll(() => proxy.forwarding(inboxListen), { timeout: 20_000 }).toBe(1);
      expect(await a.send("host-b", call("s1"), 600_000)).toEqual({ status: "ok", result: "served" });
    } finally {
      for (const inbox of opened) await inbox.close();
      await proxy.stop();
      await dropSchema(pgUrl!, schema);
    }
  });
});
