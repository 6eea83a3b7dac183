import pg from "pg";
import { describe, expect, it, vi } from "vitest";
import { CallRouter } from "../../src/host/call-router.js";
import { gate } from "../support/gate.js";
import {
  ALICE,
  clusterEachTest,
  forwardedCalls,
  holdTurnStart,
  pgUrl,
  prompt,
  readLog,
  SHORT_LEASE_TTL_MS,
  turnEnd,
  UNREACHED_FORWARD_WAIT_MS,
} from "./multi-host-fixture.js";

interface HeldClaim {
  /** The call the held claim took, once it took one. */
  claimed: Promise<string>;
  /** Hands the claim's answer to its owner: from then on it goes on as a resumed host would. */
  release: () => void;
  /**
   * Settles once the first statement of the call sent after `release` (the owner's, with the call
   * in hand) was answered: the owner's next step is then only a few turns of its event loop away.
   */
  after: Promise<void>;
}

/**
 * Holds the first claim of the calls addressed to `hostId` that takes one: the database has it
 * claimed, and its owner does not see it, as a host stopped (SIGSTOP, a frozen VM) right after the
 * claim committed, before it began the call. Undone by `restoreAllMocks`.
 */
function holdClaim(hostId: string): HeldClaim {
  const claimed = gate();
  const released = gate();
  const after = gate();
  let callId: string | undefined;
  let holding = true;
  // every statement goes through a client's query, the pool's own too (with a callback)
  const clientQuery = pg.Client.prototype.query as (...args: unknown[]) => unknown;
  const watchOwner = () =>
    vi.spyOn(pg.Client.prototype, "query").mockImplementation(function (this: pg.Client, ...args: unknown[]) {
      const values = args[1] as unknown[] | undefined;
      if (values?.[0] !== callId) return clientQuery.apply(this, args);
      const callback = args[2];
      if (typeof callback === "function") {
        args[2] = (...answer: unknown[]) => {
          after.open();
          return callback(...answer);
        };
        return clientQuery.apply(this, args);
      }
      const ran = clientQuery.apply(this, args) as Promise<unknown>;
      ran.then(after.open, after.open);
      return ran;
    } as typeof pg.Client.prototype.query);
  const query = pg.Pool.prototype.query as (...args: unknown[]) => Promise<pg.QueryResult>;
  vi.spyOn(pg.Pool.prototype, "query").mockImplementation(function (this: pg.Pool, ...args: unknown[]) {
    const text = typeof args[0] === "string" ? args[0] : "";
    const values = args[1] as unknown[] | undefined;
    const ran = query.apply(this, args);
    if (!holding || !text.includes("SET claimed_at = clock_timestamp()") || values?.[0] !== hostId)
      return ran;
    return ran.then(async (result) => {
      const taken = result.rows.find((row: { call_id: string | null }) => row.call_id !== null);
      if (!holding || !taken) return result;
      holding = false;
      callId = taken.call_id as string;
      claimed.open();
      await released.promise;
      watchOwner();
      return result;
    });
  } as typeof pg.Pool.prototype.query);
  return {
    claimed: claimed.promise.then(() => callId!),
    release: () => released.open(),
    after: after.promise,
  };
}

/**
 * An owner that stops (a pause or a crash past its lease) with a forwarded call claimed: the call
 * it had not begun is taken back by its sender and runs on the next owner, once; one it had begun
 * may have run, and its caller is told `outcome_unknown`.
 */
describe.skipIf(!pgUrl)(
  "an owner stopped past its lease with a forwarded call claimed, on one PostgreSQL database",
  () => {
    const clusters = clusterEachTest();

    /** Two hosts whose forward wait no test outlives, B's metrics its own, and a session A owns after one turn. */
    async function ownedOnA() {
      const { cluster, a, b, metrics, sessionId } = await clusters.ownedOnA({
        leaseTtlMs: SHORT_LEASE_TTL_MS,
        forwardTimeoutMs: UNREACHED_FORWARD_WAIT_MS,
      });
      const first = await a.host.call(ALICE, "session.prompt", { sessionId, ...prompt("on a") });
      expect(await turnEnd(a.store, sessionId, first.turnId!)).toBe("completed");
      return { a, b, metrics, sessionId, schema: cluster.schema };
    }

    it("a prompt the owner claimed and stopped before beginning is taken back once its lease ran out, and runs once on the next owner, answered", async () => {
      const { a, b, metrics, sessionId } = await ownedOnA();
      const served = vi.spyOn(CallRouter.prototype, "serve");
      const held = holdClaim("host-a");
      const sent = b.host.call(ALICE, "session.prompt", { sessionId, ...prompt("once") });
      const callId = await held.claimed;
      // A stops with the call claimed: it renews nothing and begins nothing
      a.host.leases?.stopRenewals();
      try {
        // the call never began on A: B takes it back as A's lease runs out and runs it itself, as the
        // session's next owner; told outcome_unknown, its caller would not know whether to send again
        const answer = await sent;
        expect(answer.turnId).toEqual(expect.any(String));
        expect(await turnEnd(b.store, sessionId, answer.turnId!)).toBe("completed");
        expect(b.host.leases?.lease(sessionId)?.hostId).toBe("host-b");
      } finally {
        held.release();
      }
      // A resumes with the claim in hand: the call is no longer its to begin
      await held.after;
      await new Promise((resolve) => setImmediate(resolve));
      await a.inbox.close();
      expect(served.mock.calls.filter(([call]) => call.callId === callId)).toEqual([]);
      const log = await readLog(b.store, sessionId);
      expect(log.filter((e) => e.type === "user/message").map((e) => e.data.text)).toEqual(["on a", "once"]);
      expect(await forwardedCalls(metrics)).toEqual([
        'sessionmux_forwarded_calls_total{outcome="withdrawn"} 1',
      ]);
    }, 60_000);

    it("a prompt the owner began before it stopped is still answered outcome_unknown once its lease ran out, and is not run again", async () => {
      const { a, b, metrics, sessionId, schema } = await ownedOnA();
      // A begins the prompt and stops as its turn is about to open
      const stalled = holdTurnStart(a.store);
      const sent = b.host.call(ALICE, "session.prompt", { sessionId, ...prompt("maybe") });
      await stalled.taken;
      const db = new pg.Client({ connectionString: pgUrl! });
      await db.connect();
      try {
        // the row says the call began: its sender cannot take it back
        const rows = await db.query<{ started: boolean }>(
          `SELECT started FROM "${schema}".forwarded_calls WHERE from_host = 'host-b'`,
        );
        expect(rows.rows).toEqual([{ started: true }]);
        a.host.leases?.stopRenewals();
        await expect(sent).rejects.toMatchObject({
          code: "outcome_unknown",
          retryable: false,
          data: { method: "session.prompt", outcome: "unknown" },
        });
        // given up: its row is gone, so nobody answers or runs it later
        const left = await db.query(`SELECT 1 FROM "${schema}".forwarded_calls`);
        expect(left.rows).toEqual([]);
        // B takes the session before A resumes: what A began appends nothing past its lease
        await expect
          .poll(async () => (await b.host.leases!.acquire(sessionId)).status, {
            timeout: 30_000,
            interval: 200,
          })
          .toBe("acquired");
      } finally {
        stalled.release();
        await db.end();
      }
      expect(await forwardedCalls(metrics)).toEqual([
        'sessionmux_forwarded_calls_total{outcome="unknown"} 1',
      ]);
      // not sent again: B never ran it
      const next = await b.host.call(ALICE, "session.prompt", { sessionId, ...prompt("next") });
      expect(await turnEnd(b.store, sessionId, next.turnId!)).toBe("completed");
      const log = await readLog(b.store, sessionId);
      expect(log.filter((e) => e.type === "user/message").map((e) => e.data.text)).toEqual(["on a", "next"]);
    }, 60_000);
  },
);
