import { describe, expect, it } from "vitest";
import { TURN_ENDS_SINCE } from "../../../src/store/postgres/pg-reads.js";
import { pgUrl } from "../contract/backends.js";
import { migratedSchema } from "./migrated-schema.js";

const SESSIONS = 50;
/** Each session's log: its create, then turns, the last one's `turn/end` one event below the head. */
const EVENTS = 400;

interface PlanNode {
  "Relation Name"?: string;
  "Actual Rows"?: number;
  "Actual Loops"?: number;
  "Rows Removed by Filter"?: number;
  Plans?: PlanNode[];
}

/** Rows every scan of `table` in the plan read over all its loops: those it returned and those its filter dropped. */
function rowsRead(node: PlanNode, table: string): number {
  const perLoop = (node["Actual Rows"] ?? 0) + (node["Rows Removed by Filter"] ?? 0);
  const own = node["Relation Name"] === table ? perLoop * (node["Actual Loops"] ?? 1) : 0;
  return own + (node.Plans ?? []).reduce((sum, child) => sum + rowsRead(child, table), 0);
}

const inMigratedSchema = migratedSchema("tes");

/**
 * After an outage, a host reads the `turn/end` of each session whose row says its last turn failed
 * and that it had delivered nothing of: a page of them per statement, each from its log's head
 * down, so a long log costs no more than a short one.
 */
describe.skipIf(!pgUrl)("the read of the sessions' last turn/end after an outage, on PostgreSQL", () => {
  it("reads each session's log from its head down to its last turn/end, not the whole log", async () => {
    await inMigratedSchema(async (client) => {
      const since = (await client.query<{ xid: string }>("SELECT pg_current_xact_id()::xid AS xid")).rows[0]!
        .xid;
      await client.query(
        `INSERT INTO sessions (session_id, owner, epoch, created_at, base_title, base_title_explicit, base_model)
         SELECT 's' || lpad(g::text, 3, '0'), 'alice', 'e', 1, '', false, 'demo' FROM generate_series(1, ${SESSIONS}) g`,
      );
      await client.query(
        `INSERT INTO events (session_id, seq, type, at, data)
         SELECT 's' || lpad(g::text, 3, '0'), 1, 'session/created', 1, '\\x80'::bytea FROM generate_series(1, ${SESSIONS}) g`,
      );
      // the turns come after the create, in a transaction of their own
      await client.query(
        `INSERT INTO events (session_id, seq, type, at, data)
         SELECT 's' || lpad(g::text, 3, '0'), n,
           CASE WHEN n = ${EVENTS} THEN 'session/renamed' WHEN n % 2 = 1 THEN 'turn/end' ELSE 'turn/start' END,
           n, '\\x80'::bytea
         FROM generate_series(1, ${SESSIONS}) g, generate_series(2, ${EVENTS}) n`,
      );
      await client.query("ANALYZE sessions; ANALYZE events");
      const ids = `{${Array.from({ length: SESSIONS }, (_, i) => `s${String(i + 1).padStart(3, "0")}`).join(",")}}`;
      const found = await client.query<{ session_id: string; seq: number }>(TURN_ENDS_SINCE, [ids, since]);
      expect(found.rows.map((r) => Number(r.seq))).toEqual(Array(SESSIONS).fill(EVENTS - 1));
      const { rows } = await client.query<{ "QUERY PLAN": [{ Plan: PlanNode }] }>(
        `EXPLAIN (ANALYZE, FORMAT JSON) ${TURN_ENDS_SINCE}`,
        [ids, since],
      );
      // per session: the head, its turn/end, and the create the turn/end is compared with
      expect(rowsRead(rows[0]!["QUERY PLAN"][0].Plan, "events")).toBeLessThanOrEqual(SESSIONS * 3);
    });
  });
});
