import { describe, expect, it } from "vitest";
import { RETIRED_SINCE } from "../../../src/store/postgres/pg-reads.js";
import { pgUrl } from "../contract/backends.js";
import { migratedSchema } from "./migrated-schema.js";

const SESSIONS = 3000;
/** One session in ten is deleted. */
const RETIRED = SESSIONS / 10;

interface PlanNode {
  "Relation Name"?: string;
  "Actual Rows"?: number;
  "Rows Removed by Filter"?: number;
  Plans?: PlanNode[];
}

/** Rows each scan of `table` in the plan read: those it returned and those its filter dropped. */
function rowsRead(node: PlanNode, table: string): number {
  const own =
    node["Relation Name"] === table ? (node["Actual Rows"] ?? 0) + (node["Rows Removed by Filter"] ?? 0) : 0;
  return own + (node.Plans ?? []).reduce((sum, child) => sum + rowsRead(child, table), 0);
}

const inMigratedSchema = migratedSchema("rri");

/**
 * A host whose LISTEN connection dropped re-reads the sessions deleted meanwhile. The transaction
 * that retired a row is its `xmin`, which no index holds; what an index can spare is every live
 * session, which is most of the table.
 */
describe.skipIf(!pgUrl)("the re-read of deleted sessions, on PostgreSQL", () => {
  it("reads the retired sessions only, not the live ones", async () => {
    await inMigratedSchema(async (client) => {
      await client.query(
        `INSERT INTO sessions (session_id, owner, epoch, created_at, base_title, base_title_explicit, base_model, retired_at)
         SELECT 's' || lpad(g::text, 5, '0'), 'alice', 'e', 1, '', false, 'demo',
           CASE WHEN g % 10 = 0 THEN 2 END
         FROM generate_series(1, ${SESSIONS}) g`,
      );
      await client.query("ANALYZE sessions");
      const since = (await client.query<{ xid: string }>("SELECT pg_current_xact_id()::xid AS xid")).rows[0]!
        .xid;
      const { rows } = await client.query<{ "QUERY PLAN": [{ Plan: PlanNode }] }>(
        `EXPLAIN (ANALYZE, FORMAT JSON) ${RETIRED_SINCE}`,
        [since, "", 500],
      );
      expect(rowsRead(rows[0]!["QUERY PLAN"][0].Plan, "sessions")).toBeLessThanOrEqual(RETIRED);
    });
  });
});
