import { randomBytes } from "node:crypto";
import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { PostgresSessionStore } from "../../../src/store/postgres/postgres-store.js";
import { dropSchema, pgUrl } from "../contract/backends.js";

/** Every table holding a session's rows, each emptied of them when the session is deleted. */
const SESSION_TABLES = [
  "events",
  "projections",
  "prompt_keys",
  "attachments",
  "search_docs",
  "queue_items",
  "queue_versions",
  "interactions",
  "jobs",
  "leases",
  "dismissals",
];

let schema: string | undefined;
afterEach(async () => {
  if (schema) await dropSchema(pgUrl!, schema);
  schema = undefined;
});

/**
 * A delete (and a clear) runs inside the host's group commit, with every other write of that
 * host waiting behind it: each of its statements must find the session's rows by an index, never
 * by reading the whole table, however many sessions (and jobs, and events) the database holds.
 */
describe.skipIf(!pgUrl)("the rows of one session, on PostgreSQL", () => {
  it("are found by an index in every table that holds them", async () => {
    schema = `idx_${randomBytes(6).toString("hex")}`;
    const store = await PostgresSessionStore.open(pgUrl!, { schema, maxConnections: 1 });
    await store.close();
    const client = new pg.Client({ connectionString: pgUrl! });
    await client.connect();
    try {
      await client.query(`SET search_path = "${schema}"`);
      // a table scan then costs more than any index that can serve the statement
      await client.query("SET enable_seqscan = off");
      const scanned: string[] = [];
      for (const table of SESSION_TABLES) {
        const { rows } = await client.query<{ "QUERY PLAN": string }>(
          `EXPLAIN DELETE FROM ${table} WHERE session_id = 's'`,
        );
        if (rows.some((row) => row["QUERY PLAN"].includes("Seq Scan"))) scanned.push(table);
      }
      expect(scanned).toEqual([]);
    } finally {
      await client.end();
    }
  });
});
