import pg from "pg";
import { describe, expect, it, vi } from "vitest";
import { gate } from "../support/gate.js";
import {
  ALICE,
  type ClusterHost,
  clusterEachTest,
  createSession,
  holdTurnStart,
  pgUrl,
  prompt,
  readLog,
  SHORT_LEASE_TTL_MS,
  UNREACHED_FORWARD_WAIT_MS,
} from "./multi-host-fixture.js";

/** How `call` settled, its rejection handled at once. */
function settled(call: Promise<unknown>): Promise<{ value: unknown } | { error: unknown }> {
  return call.then(
    (value) => ({ value }),
    (error: unknown) => ({ error }),
  );
}

/**
 * Holds the statements of this process's inboxes that take back `callId` not begun (a sender's
 * look as the owner's lease ends) until `release()`. Undone by `restoreAllMocks`.
 */
function holdTakeBack(callId: string): () => void {
  const released = gate();
  const query = pg.Pool.prototype.query as (...args: unknown[]) => unknown;
  vi.spyOn(pg.Pool.prototype, "query").mockImplementation(function (this: pg.Pool, ...args: unknown[]) {
    const run = () => query.apply(this, args);
    const text = typeof args[0] === "string" ? args[0] : "";
    const values = args[1] as unknown[] | undefined;
    if (
      !text.includes("(claimed_at IS NULL OR started IS FALSE) RETURNING call_id") ||
      values?.[0] !== callId
    ) {
      return run();
    }
    return released.promise.then(run);
  } as typeof pg.Pool.prototype.query);
  return () => released.open();
}

/**
 * An owner that loses a session's lease while a call forwarded to it waits for its turn behind an
 * earlier call of the session: the call never ran there, and its caller is not told it may have.
 */
describe.skipIf(!pgUrl)(
  "an owner losing a session with a forwarded call waiting its turn, on one PostgreSQL database",
  () => {
    const clusters = clusterEachTest();

    it("a prompt A claimed behind another and had not started when B took the session runs on B, answered, not outcome_unknown", async () => {
      const cluster = await clusters.open(3, {
        leaseTtlMs: SHORT_LEASE_TTL_MS,
        forwardTimeoutMs: UNREACHED_FORWARD_WAIT_MS,
      });
      const { schema } = cluster;
      const [a, b, c] = cluster.hosts as [ClusterHost, ClusterHost, ClusterHost];
      const sessionId = await createSession(a.host);
      // C's prompt runs on A, held as its turn opens: the session's earlier call
      const slow = holdTurnStart(a.store);
      const first = settled(c.host.call(ALICE, "session.prompt", { sessionId, ...prompt("first") }));
      await slow.taken;
      const second = settled(b.host.call(ALICE, "session.prompt", { sessionId, ...prompt("second") }));
      const db = new pg.Client({ connectionString: pgUrl! });
      await db.connect();
      try {
        const rows = (where: string) =>
          db
            .query<{ call_id: string }>(
              `SELECT call_id FROM "${schema}".forwarded_calls WHERE from_host = 'host-b' AND ${where}`,
            )
            .then((r) => r.rows);
        await expect
          .poll(async () => (await rows("claimed_at IS NOT NULL")).length, { timeout: 20_000 })
          .toBe(1);
        // B's look at its call as A's lease ends waits until A has answered it (or not)
        const release = holdTakeBack((await rows("true"))[0]!.call_id);
        try {
          // A pauses: its lease runs out, and B takes the session
          a.host.leases!.stopRenewals();
          await expect
            .poll(async () => (await b.host.leases!.acquire(sessionId)).status, {
              timeout: 30_000,
              interval: 200,
            })
            .toBe("acquired");
          // A hears of it and refuses the call it has not started: it never ran there
          await expect
            .poll(async () => (await rows("reply IS NOT NULL")).length, { timeout: 20_000 })
            .toBe(1);
        } finally {
          release();
        }
        const outcome = await second;
        // routed again, to B, which holds the session: told outcome_unknown, its caller would not
        // know whether to send again a prompt that never ran
        expect(outcome).toMatchObject({ value: { turnId: expect.any(String) } });
        const log = await readLog(b.store, sessionId);
        expect(log.filter((e) => e.type === "user/message").map((e) => e.data.text)).toContain("second");
      } finally {
        await db.end();
        slow.release();
        await first;
      }
    }, 60_000);
  },
);
