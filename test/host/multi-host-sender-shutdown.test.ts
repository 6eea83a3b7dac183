import pg from "pg";
import { describe, expect, it, vi } from "vitest";
import { gate } from "../support/gate.js";
import {
  ALICE,
  type ClusterHost,
  clusterEachTest,
  forwardedCalls,
  holdTurnStart,
  pgUrl,
  prompt,
  readLog,
  refusal,
  turnEnd,
  UNREACHED_FORWARD_WAIT_MS,
} from "./multi-host-fixture.js";

/**
 * Holds the next statement containing `fragment` that a connection of this process sends, before
 * it goes out, until `release()`; `held` resolves once one is held. Undone by `restoreAllMocks`.
 */
function holdClientQuery(fragment: string): { held: Promise<void>; release: () => void } {
  const held = gate();
  const released = gate();
  const query = pg.Client.prototype.query as (...args: unknown[]) => unknown;
  let holding = false;
  vi.spyOn(pg.Client.prototype, "query").mockImplementation(function (this: pg.Client, ...args: unknown[]) {
    const run = () => query.apply(this, args);
    if (holding || typeof args[0] !== "string" || !args[0].includes(fragment)) return run();
    holding = true;
    held.open();
    return released.promise.then(run);
  } as typeof pg.Client.prototype.query);
  return { held: held.promise, release: () => released.open() };
}

/**
 * A host that shuts down (its host, then its database, as a mounted host does) while a call it
 * forwarded to the session's owner waits on the owner's reply: its caller is told whether the
 * call may still take effect there.
 */
describe.skipIf(!pgUrl)(
  "a host shutting down with a forwarded call waiting, on one PostgreSQL database",
  () => {
    const clusters = clusterEachTest();
    const ownedOnA = () => clusters.ownedOnA({ forwardTimeoutMs: UNREACHED_FORWARD_WAIT_MS });

    async function shutDown(host: ClusterHost): Promise<void> {
      await host.host.shutdown();
      await host.inbox.close();
    }

    it("a prompt its owner took and runs is answered outcome_unknown, not retryable: it runs there once", async () => {
      const { a, b, metrics, sessionId } = await ownedOnA();
      const slow = holdTurnStart(a.store);
      // its answer comes as the host closes, before the test looks at it
      const sent = refusal(b.host.call(ALICE, "session.prompt", { sessionId, ...prompt("taken") }));
      await slow.taken;
      try {
        await shutDown(b);
        expect(await sent).toMatchObject({
          code: "outcome_unknown",
          retryable: false,
          data: { method: "session.prompt", outcome: "unknown" },
        });
      } finally {
        slow.release();
      }
      // sent again on its word, it would have run twice
      await expect
        .poll(async () => (await readLog(a.store, sessionId)).filter((e) => e.type === "turn/end").length, {
          timeout: 20_000,
        })
        .toBe(1);
      const log = await readLog(a.store, sessionId);
      expect(log.filter((e) => e.type === "user/message").map((e) => e.data.text)).toEqual(["taken"]);
      const turnId = log.find((e) => e.type === "turn/start")?.data.turnId;
      expect(await turnEnd(a.store, sessionId, turnId!)).toBe("completed");
      expect(await forwardedCalls(metrics)).toEqual([
        'sessionmux_forwarded_calls_total{outcome="unknown"} 1',
      ]);
    }, 30_000);

    it("a prompt its owner took and has not begun (behind an earlier call of the session) is taken back: host_shutting_down, retryable, and it never runs there", async () => {
      const { cluster, a, b, metrics, sessionId } = await ownedOnA();
      const slow = holdTurnStart(a.store);
      const first = refusal(b.host.call(ALICE, "session.prompt", { sessionId, ...prompt("first") }));
      await slow.taken;
      const second = refusal(b.host.call(ALICE, "session.prompt", { sessionId, ...prompt("second") }));
      const db = new pg.Client({ connectionString: pgUrl! });
      await db.connect();
      try {
        // A claimed the second call and holds it behind the first, whose turn is opening
        const waiting = async () =>
          (
            await db.query(
              `SELECT 1 FROM "${cluster.schema}".forwarded_calls WHERE claimed_at IS NOT NULL AND started IS FALSE`,
            )
          ).rows.length;
        await expect.poll(waiting, { timeout: 20_000 }).toBe(1);
        await shutDown(b);
        expect(await first).toMatchObject({ code: "outcome_unknown", data: { outcome: "unknown" } });
        // before: outcome_unknown, and it ran on A once the first call's turn opened, its sender gone
        expect(await second).toMatchObject({ code: "host_shutting_down", retryable: true });
        expect(await waiting()).toBe(0);
      } finally {
        await db.end();
        slow.release();
      }
      await expect
        .poll(async () => (await readLog(a.store, sessionId)).filter((e) => e.type === "turn/end").length, {
          timeout: 20_000,
        })
        .toBe(1);
      // A's next prompt runs after the taken one's turn in A's chain came and went
      const { turnId } = (await a.host.call(ALICE, "session.prompt", { sessionId, ...prompt("next") })) as {
        turnId: string;
      };
      expect(await turnEnd(a.store, sessionId, turnId)).toBe("completed");
      const log = await readLog(a.store, sessionId);
      expect(log.filter((e) => e.type === "user/message").map((e) => e.data.text)).toEqual(["first", "next"]);
      expect((await forwardedCalls(metrics)).sort()).toEqual([
        'sessionmux_forwarded_calls_total{outcome="timeout"} 1',
        'sessionmux_forwarded_calls_total{outcome="unknown"} 1',
      ]);
    }, 30_000);

    it("a prompt its owner answered before the shutdown, its reply not yet read, is answered with the owner's answer", async () => {
      const { cluster, a, b, metrics, sessionId } = await ownedOnA();
      // B heard the reply's notice, and its look for the reply waits
      const look = holdClientQuery("octet_length(reply) AS size");
      const sent = b.host.call(ALICE, "session.prompt", { sessionId, ...prompt("answered") });
      // its outcome is looked at once the host closed
      sent.catch(() => undefined);
      const db = new pg.Client({ connectionString: pgUrl! });
      await db.connect();
      let shutting: Promise<void>;
      try {
        const rows = (where: string) => async () =>
          (await db.query(`SELECT 1 FROM "${cluster.schema}".forwarded_calls WHERE ${where}`)).rows.length;
        await expect.poll(rows("reply IS NOT NULL"), { timeout: 20_000 }).toBe(1);
        await look.held;
        shutting = shutDown(b);
        // read by the close, which deletes the row
        await expect.poll(rows("true"), { timeout: 20_000 }).toBe(0);
      } finally {
        await db.end();
        look.release();
      }
      await shutting;
      // the prompt ran there: told outcome_unknown, its caller would not know what the owner said
      const { turnId } = (await sent) as { turnId: string };
      expect(await turnEnd(a.store, sessionId, turnId)).toBe("completed");
      expect(await forwardedCalls(metrics)).toEqual(['sessionmux_forwarded_calls_total{outcome="ok"} 1']);
    }, 30_000);

    it("a prompt its owner has not claimed is taken back: host_shutting_down, retryable, and it never reaches the owner", async () => {
      const { cluster, a, b, sessionId } = await ownedOnA();
      // A holds its lease and claims nothing
      await a.inbox.close();
      const sent = refusal(b.host.call(ALICE, "session.prompt", { sessionId, ...prompt("never taken") }));
      const db = new pg.Client({ connectionString: pgUrl! });
      await db.connect();
      try {
        const rows = async () =>
          (await db.query(`SELECT 1 FROM "${cluster.schema}".forwarded_calls WHERE target_host = 'host-a'`))
            .rows.length;
        await expect.poll(rows, { timeout: 20_000 }).toBe(1);
        await shutDown(b);
        expect(await sent).toMatchObject({ code: "host_shutting_down", retryable: true });
        // whoever serves host-a next finds nothing to run
        expect(await rows()).toBe(0);
      } finally {
        await db.end();
      }
      expect((await readLog(a.store, sessionId)).filter((e) => e.type === "user/message")).toEqual([]);
    }, 30_000);
  },
);
