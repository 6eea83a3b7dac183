import pg from "pg";
import { expect, it } from "vitest";
import { readWholeLog } from "../../support/whole-log.js";
import { pgUrl } from "../contract/backends.js";
import { turnStart, userMessage } from "../open-store.js";
import { twoHostsFixture } from "./two-hosts.js";

/**
 * An answer reads its interaction, then locks the interaction's session and reads it again: the
 * first read was not under any lock, and another host may have changed the row in between (its
 * session deleted, its turn ended). The test holds the session's row lock itself, so the answer
 * waits between its two reads for as long as the test needs, and changes the row meanwhile.
 */
const openHosts = twoHostsFixture("answer");
const S = "s";

it.skipIf(!pgUrl)(
  "an interaction removed while its answer waited for the session's lock is not_found, and nothing is appended",
  async () => {
    const { a, schema } = await openHosts();
    await a.create({ sessionId: S, owner: "alice", model: "m" });
    await a.append(S, [
      turnStart("t1"),
      userMessage("/approve x"),
      {
        type: "interaction/requested",
        data: { turnId: "t1", interactionId: "i1", kind: "approval", action: "x" },
      },
    ]);
    const other = new pg.Client({ connectionString: pgUrl! });
    // activity is read outside `other`'s transaction, which would see one snapshot of it
    const watcher = new pg.Client({ connectionString: pgUrl! });
    await other.connect();
    await watcher.connect();
    try {
      await other.query(`SET search_path = "${schema}"`);
      await other.query("BEGIN");
      await other.query("SELECT 1 FROM projections WHERE session_id = $1 FOR UPDATE", [S]);
      const { rows } = await other.query<{ pid: number }>("SELECT pg_backend_pid() AS pid");
      const answer = a.resolveInteraction("i1", { outcome: "approve" });
      // the answer read the row and now waits for the lock this connection holds
      await expect
        .poll(async () => {
          const waiting = await watcher.query<{ n: number }>(
            "SELECT count(*)::int AS n FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))",
            [rows[0]!.pid],
          );
          return waiting.rows[0]!.n;
        })
        .toBe(1);
      await other.query("DELETE FROM interactions WHERE interaction_id = 'i1'");
      await other.query("COMMIT");
      expect(await answer).toEqual({ status: "not_found" });
    } finally {
      await other.end();
      await watcher.end();
    }
    const log = await readWholeLog(a, S);
    expect(log.status === "ok" ? log.events.map((e) => e.type) : log).not.toContain("interaction/resolved");
  },
);
