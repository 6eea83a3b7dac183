import { randomBytes } from "node:crypto";
import { once } from "node:events";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import pg from "pg";
import { describe, expect, inject, it, vi } from "vitest";
import { createNodeClient } from "../../src/client/node.js";
import { createSessionmux } from "../../src/index.js";
import { PostgresSessionStore } from "../../src/store/postgres/postgres-store.js";
import { scratchDatabase } from "../store/postgres/scratch-database.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { capturedLogger } from "../support/log-capture.js";
import { until } from "../support/until.js";
import { readWholeLog } from "../support/whole-log.js";
import { ShoutAgent } from "./shout-agent.js";

const pgUrl = inject("pgUrl");
const cleanups = cleanupsAfterEach();
const tokens = [{ name: "admin", secret: "embed-token", admin: true }];
const ADMIN = { name: "admin", admin: true };

/** A schema of the test's own, dropped after it. */
function freshSchema(): string {
  const schema = `embed_${randomBytes(5).toString("hex")}`;
  cleanups.push(async () => {
    const client = new pg.Client({ connectionString: pgUrl! });
    await client.connect();
    await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await client.end();
  });
  return schema;
}

/** A connection of the test's own to the schema, outside the host. */
async function adminClient(schema: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: pgUrl!, options: `-c search_path=${schema}` });
  await client.connect();
  cleanups.push(() => client.end());
  return client;
}

describe.skipIf(!pgUrl)("createSessionmux on a PostgreSQL URL", () => {
  it("creates the schema, serves prompts, keeps the log in PostgreSQL and names its host in /metrics", async () => {
    const schema = freshSchema();
    const mux = await createSessionmux({
      db: pgUrl!,
      dbSchema: schema,
      hostId: "embedded-1",
      tokens,
      agent: new ShoutAgent(),
      basePath: "/chat",
    });
    cleanups.push(() => mux.close());
    expect(mux.hostId).toBe("embedded-1");
    expect(mux.store).toBeInstanceOf(PostgresSessionStore);
    const server = createServer();
    mux.attach(server);
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
    const origin = `127.0.0.1:${(server.address() as AddressInfo).port}`;

    const client = createNodeClient({ url: `ws://${origin}/chat/api/remote.mux`, token: "embed-token" });
    cleanups.push(() => client.close());
    await client.create({ sessionId: "pg-embed" });
    await client.prompt({ sessionId: "pg-embed", text: "hello there" });
    // read back from PostgreSQL by another store instance: the turn ran and was committed there
    const reader = await PostgresSessionStore.open(pgUrl!, { schema, maxConnections: 1 });
    cleanups.push(() => reader.close());
    await expect
      .poll(async () => {
        const read = await readWholeLog(reader, "pg-embed");
        return read.status === "ok" ? read.events.map((event) => event.type) : [];
      })
      .toContain("turn/end");

    const metrics = await fetch(`http://${origin}/chat/metrics`, {
      headers: { authorization: "Bearer embed-token" },
    });
    const text = await metrics.text();
    expect(text).toContain('sessionmux_host_info{host_id="embedded-1"} 1');
    // the host's pools, read at the scrape: the group commit's one connection is open
    expect(text).toMatch(/^sessionmux_db_connections\{pool="writer",state="idle"\} 1$/m);
    expect(text).toMatch(/^sessionmux_db_waiting\{pool="reads"\} 0$/m);
    for (const pool of ["inbox", "uploads", "readiness"])
      expect(text).toMatch(new RegExp(`^sessionmux_db_waiting\\{pool="${pool}"\\} 0$`, "m"));
  });

  it("reads on no more connections at once than the pool size it is given", async () => {
    // a database of the test's own, so the count of waiting connections is this host's alone
    const scratch = await scratchDatabase(pgUrl!, "smx_embed");
    cleanups.push(() => scratch.drop());
    const mux = await createSessionmux({ db: scratch.url, tokens, dbPoolSize: 2 });
    cleanups.push(() => mux.close());
    const admin = new pg.Client({ connectionString: scratch.url });
    await admin.connect();
    cleanups.push(() => admin.end());
    const waiting = async () => {
      const { rows } = await scratch.server.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity
         WHERE datname = $1 AND application_name = 'sessionmux' AND wait_event_type = 'Lock'`,
        [scratch.name],
      );
      return rows[0]!.n;
    };
    await admin.query("BEGIN");
    await admin.query("LOCK TABLE projections IN ACCESS EXCLUSIVE MODE");
    const reads = Array.from({ length: 4 }, () => mux.store.list({ limit: 10 }));
    try {
      await until(async () => (await waiting()) >= 2, 5_000, "two reads waiting on the lock");
      // a pool allowed more would have sent the other two by now (the default is 10)
      for (let i = 0; i < 10; i++) {
        expect(await waiting()).toBe(2);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    } finally {
      await admin.query("COMMIT");
    }
    for (const read of await Promise.all(reads)) expect(read.rows).toEqual([]);
  });

  it("runs an agent under a lease of the shared database, of the lifetime it is given", async () => {
    const schema = freshSchema();
    const mux = await createSessionmux({
      db: pgUrl!,
      dbSchema: schema,
      hostId: "embedded-lease",
      tokens,
      agent: new ShoutAgent(),
      leaseTtlMs: 3_600_000,
    });
    cleanups.push(() => mux.close());
    const client = mux.connect(ADMIN);
    cleanups.push(() => client.close());
    await client.create({ sessionId: "leased" });
    // another host sharing the database sees who runs the agent, until when by the database's clock
    const holder = await (mux.store as PostgresSessionStore).leaseHolder("leased");
    expect(holder).toMatchObject({ sessionId: "leased", hostId: "embedded-lease" });
    const admin = await adminClient(schema);
    const { rows } = await admin.query<{ now: number }>(
      "SELECT (extract(epoch FROM now()) * 1000)::float8 AS now",
    );
    // an hour, not the default ten seconds
    expect(holder!.expiresAt - rows[0]!.now).toBeGreaterThan(30 * 60_000);
  });

  it("logs an upload sweep that fails, with the database's error", async () => {
    const schema = freshSchema();
    const { logger, lines } = capturedLogger();
    const mux = await createSessionmux({ db: pgUrl!, dbSchema: schema, tokens, uploadTtlMs: 1_000, logger });
    cleanups.push(() => mux.close());
    // every sweep's DELETE fails, as on a table the host's role lost the right to change
    const admin = await adminClient(schema);
    await admin.query(`
      CREATE FUNCTION refuse_sweep() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN RAISE EXCEPTION 'sweep refused' USING ERRCODE = '42501'; END $$;
      CREATE TRIGGER refuse_sweep BEFORE DELETE ON attachments
        FOR EACH STATEMENT EXECUTE FUNCTION refuse_sweep();`);
    // the sweep runs every second for a lifetime of one second
    await vi.waitFor(
      () =>
        expect(lines.find((line) => line.msg === "upload sweep failed")).toMatchObject({
          err: expect.objectContaining({ message: "sweep refused" }),
        }),
      { timeout: 5_000, interval: 20 },
    );
  });
});
