import { describe, expect, it } from "vitest";
import { pgUrl } from "../contract/backends.js";
import { migratedSchema } from "./migrated-schema.js";

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

const inMigratedSchema = migratedSchema("idx");

/**
 * A delete (and a clear) runs inside the host's group commit, with every other write of that
 * host waiting behind it: each of its statements must find the session's rows by an index, never
 * by reading the whole table, however many sessions (and jobs, and events) the database holds.
 */
describe.skipIf(!pgUrl)("the rows of one session, on PostgreSQL", () => {
  it("are found by an index in every table that holds them", async () => {
    await inMigratedSchema(async (client) => {
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
    });
  });
});
