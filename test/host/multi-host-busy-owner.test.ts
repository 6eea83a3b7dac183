import pg from "pg";
import { describe, expect, it } from "vitest";
import {
  ALICE,
  clusterEachTest,
  forwardedCalls,
  holdTurnStart,
  pgUrl,
  prompt,
  readLog,
  refusal,
} from "./multi-host-fixture.js";

/**
 * An owner that holds the session and takes a forwarded call, but has not begun it when its
 * sender's longest wait on a claimed call ends (the session's earlier call is slow): the sender
 * takes it back, so it never runs, and its caller is told so, retryable.
 */
describe.skipIf(!pgUrl)(
  "a forwarded call its busy owner took and has not begun, on one PostgreSQL database",
  () => {
    const clusters = clusterEachTest();

    it("is taken back at the longest wait and answered overloaded, retryable: it never runs on the owner", async () => {
      // a claimed call is waited on for the longest wait, past the forward wait
      const { cluster, a, b, metrics, sessionId } = await clusters.ownedOnA({
        forwardTimeoutMs: 500,
        claimedWaitMs: 1_500,
      });
      const slow = holdTurnStart(a.store);
      // the session's first forwarded call: begun on A, held as its turn opens, past every wait
      const first = b.host.call(ALICE, "session.prompt", { sessionId, ...prompt("first") });
      first.catch(() => undefined);
      await slow.taken;
      const db = new pg.Client({ connectionString: pgUrl! });
      await db.connect();
      try {
        const second = refusal(b.host.call(ALICE, "session.prompt", { sessionId, ...prompt("second") }));
        // before: outcome_unknown, not retryable, though its row was deleted unbegun: it never ran
        expect(await second).toMatchObject({
          code: "overloaded",
          retryable: true,
          data: { method: "session.prompt" },
        });
        // the first, begun, was given up before it (sent earlier), outcome_unknown: it may run
        await expect(first).rejects.toMatchObject({ code: "outcome_unknown" });
        // both rows went as they were given up: A can no longer begin the second
        const rows = await db.query(`SELECT 1 FROM "${cluster.schema}".forwarded_calls`);
        expect(rows.rows).toEqual([]);
      } finally {
        await db.end();
        slow.release();
      }
      // A's next prompt runs after the taken one's turn in A's chain came and went
      await a.host.call(ALICE, "session.prompt", { sessionId, ...prompt("next") });
      await expect
        .poll(async () => (await readLog(a.store, sessionId)).filter((e) => e.type === "turn/end").length, {
          timeout: 20_000,
        })
        .toBe(2);
      const log = await readLog(a.store, sessionId);
      expect(log.filter((e) => e.type === "user/message").map((e) => e.data.text)).toEqual(["first", "next"]);
      expect((await forwardedCalls(metrics)).sort()).toEqual([
        'sessionmux_forwarded_calls_total{outcome="not_begun"} 1',
        'sessionmux_forwarded_calls_total{outcome="unknown"} 1',
      ]);
    }, 30_000);
  },
);
