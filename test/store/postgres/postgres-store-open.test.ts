import pg from "pg";
import { describe, expect, inject, it } from "vitest";
import { MissingSchemaError } from "../../../src/store/postgres/pg-schema.js";
import { PostgresSessionStore } from "../../../src/store/postgres/postgres-store.js";
import { cleanupsAfterEach } from "../../support/cleanups.js";
import { until } from "../../support/until.js";
import { scratchDatabase } from "./scratch-database.js";

/**
 * How `PostgresSessionStore.open` sets up its connections: the default schema, the pool's size,
 * a connection the server ends while idle, and an open that fails. Each test has a database of its
 * own, so its connections are counted in `pg_stat_activity` apart from every other test's.
 */

const pgUrl = inject("pgUrl");
/** Every wait for the database to reach a state gives up past this. */
const WAIT_LIMIT_MS = 5_000;

const cleanups = cleanupsAfterEach();

interface Database {
  url: string;
  /** A connection of the test's own to the database, outside the store. */
  admin: pg.Client;
  /** The store's pooled connections now in the database (its LISTEN connection is not pooled). */
  pooled(filter?: string): Promise<number>;
}

async function newDatabase(): Promise<Database> {
  const scratch = await scratchDatabase(pgUrl!, "smx_open");
  const admin = new pg.Client({ connectionString: scratch.url });
  await admin.connect();
  cleanups.push(async () => {
    await admin.end();
    await scratch.drop();
  });
  return {
    url: scratch.url,
    admin,
    async pooled(filter = "true") {
      // asked on another connection than `admin`: inside a transaction the view stays as first read
      const { rows } = await scratch.server.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity
         WHERE datname = $1 AND application_name = 'sessionmux' AND ${filter}`,
        [scratch.name],
      );
      return rows[0]!.n;
    },
  };
}

async function openStore(url: string, options: Parameters<typeof PostgresSessionStore.open>[1] = {}) {
  const store = await PostgresSessionStore.open(url, options);
  cleanups.push(() => store.close());
  return store;
}

describe.skipIf(!pgUrl)("opening a PostgreSQL store", () => {
  it("with no schema given, keeps its tables in the database's public schema", async () => {
    const db = await newDatabase();
    const store = await openStore(db.url);
    expect((await store.create({ sessionId: "s", owner: "alice", model: "m" })).status).toBe("created");
    const { rows } = await db.admin.query<{ schema: string }>(
      "SELECT table_schema AS schema FROM information_schema.tables WHERE table_name = 'events'",
    );
    expect(rows).toEqual([{ schema: "public" }]);
    expect((await store.list({ limit: 10 })).rows.map((row) => row.sessionId)).toEqual(["s"]);
  });

  it("reads on no more connections at once than maxConnections", async () => {
    const db = await newDatabase();
    const store = await openStore(db.url, { maxConnections: 2 });
    await store.create({ sessionId: "s", owner: "alice", model: "m" });
    // every read of the list waits on the lock, each on a connection of its own while the pool has one
    await db.admin.query("BEGIN");
    await db.admin.query("LOCK TABLE projections IN ACCESS EXCLUSIVE MODE");
    const reads = Array.from({ length: 4 }, () => store.list({ limit: 10 }));
    const waiting = () => db.pooled("wait_event_type = 'Lock'");
    try {
      await until(async () => (await waiting()) >= 2, WAIT_LIMIT_MS, "two reads waiting on the lock");
      // a pool allowed more would have opened them by now: the two waiting reads were sent last
      for (let i = 0; i < 10; i++) {
        expect(await waiting()).toBe(2);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    } finally {
      await db.admin.query("COMMIT");
    }
    for (const read of await Promise.all(reads)) expect(read.rows.map((row) => row.sessionId)).toEqual(["s"]);
  });

  it("outlives idle connections the server ends: the next read and write connect again", async () => {
    const db = await newDatabase();
    const store = await openStore(db.url);
    await store.create({ sessionId: "s", owner: "alice", model: "m" });
    await store.list({ limit: 10 });
    // one idle connection in the pool of reads, one in the group commit's
    expect(await db.pooled()).toBeGreaterThanOrEqual(2);
    await db.admin.query(
      `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
       WHERE datname = current_database() AND application_name = 'sessionmux'`,
    );
    await until(async () => (await db.pooled()) === 0, WAIT_LIMIT_MS, "the ended connections gone");
    // an idle connection's end reaches its pool as an `error` event: unheard, it would end the process
    await until(
      () =>
        store.list({ limit: 10 }).then(
          () => true,
          () => false,
        ),
      WAIT_LIMIT_MS,
      "the store answering again",
    );
    expect((await store.create({ sessionId: "t", owner: "alice", model: "m" })).status).toBe("created");
    expect((await store.list({ limit: 10 })).rows.map((row) => row.sessionId).sort()).toEqual(["s", "t"]);
  });

  it("an open that fails leaves no connection behind", async () => {
    const db = await newDatabase();
    await expect(
      PostgresSessionStore.open(db.url, { schema: "nothing_here", createSchema: false }),
    ).rejects.toBeInstanceOf(MissingSchemaError);
    await until(async () => (await db.pooled()) === 0, WAIT_LIMIT_MS, "the failed open's connections closed");
    // the count sees a store's connections (a pool ends an idle one only after ten seconds)
    const store = await PostgresSessionStore.open(db.url, { schema: "nothing_here" });
    try {
      expect(await db.pooled()).toBeGreaterThan(0);
    } finally {
      await store.close();
    }
  });
});
