import pg from "pg";
import { describe, expect, it } from "vitest";
import { isPostgresUrl, openStore } from "../../src/store/open-store.js";
import { PostgresSessionStore } from "../../src/store/postgres/postgres-store.js";
import { SqliteSessionStore } from "../../src/store/sqlite-store.js";
import type { StoreMetrics } from "../../src/store/store-metrics.js";
import { tempDir } from "../support/temp-dir.js";
import { pgUrl } from "./contract/backends.js";
import { scratchDatabase } from "./postgres/scratch-database.js";

describe("openStore", () => {
  it("tells PostgreSQL URLs from file paths", () => {
    expect(isPostgresUrl("postgres://u@h:5432/db")).toBe(true);
    expect(isPostgresUrl("postgresql://u@h/db")).toBe(true);
    expect(isPostgresUrl("./data/sessions.db")).toBe(false);
    expect(isPostgresUrl("/tmp/postgres://x.db")).toBe(false);
  });

  it("opens SQLite for a path", async () => {
    const dir = tempDir("sessionmux-open-");
    const store = await openStore(dir.file("s.db"));
    try {
      expect(store).toBeInstanceOf(SqliteSessionStore);
      expect((await store.create({ sessionId: "a", owner: "o", model: "m" })).status).toBe("created");
    } finally {
      await store.close();
      dir.remove();
    }
  });

  it("hands a SQLite store the metrics it is given: a created session is one commit of one event", async () => {
    const dir = tempDir("sessionmux-open-");
    const { metrics, commits } = countedMetrics();
    const store = await openStore(dir.file("s.db"), { metrics });
    try {
      expect((await store.create({ sessionId: "a", owner: "o", model: "m" })).status).toBe("created");
      expect(commits).toEqual([1]);
    } finally {
      await store.close();
      dir.remove();
    }
  });

  it.skipIf(!pgUrl)(
    "opens PostgreSQL for a postgres:// URL, with its schema and metrics: the tables are in that schema, a created session is one commit of one event",
    async () => {
      // a database of its own: were the schema not handed on, nothing would be left in a shared one
      const scratch = await scratchDatabase(pgUrl!, "open_store");
      try {
        const { metrics, commits } = countedMetrics();
        const store = await openStore(scratch.url, { schema: "hosts_a", metrics });
        try {
          expect(store).toBeInstanceOf(PostgresSessionStore);
          expect((await store.create({ sessionId: "a", owner: "o", model: "m" })).status).toBe("created");
          expect(commits).toEqual([1]);
        } finally {
          await store.close();
        }
        const client = new pg.Client({ connectionString: scratch.url });
        await client.connect();
        try {
          const tables = await client.query<{ schema: string }>(
            "SELECT DISTINCT table_schema AS schema FROM information_schema.tables WHERE table_name = 'sessions'",
          );
          expect(tables.rows).toEqual([{ schema: "hosts_a" }]);
        } finally {
          await client.end();
        }
      } finally {
        await scratch.drop();
      }
    },
    // creating a database takes a while on a busy server
    30_000,
  );
});

/** Metrics that keep the count of events of each commit. */
function countedMetrics(): { metrics: StoreMetrics; commits: number[] } {
  const commits: number[] = [];
  return { metrics: { committed: (_seconds, events) => commits.push(events) }, commits };
}
