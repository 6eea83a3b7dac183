import { randomUUID } from "node:crypto";
import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import {
  ALICE,
  type Cluster,
  createSession,
  forwardedCalls,
  holdTurnStart,
  metricsFor,
  openCluster,
  pgUrl,
  readLog,
  turnEnd,
} from "./multi-host-fixture.js";

const prompt = (text: string) => ({ clientMessageId: randomUUID(), text });

type Host = Cluster["hosts"][0];

/** The error `call` rejects with (undefined if it succeeds), its rejection handled at once. */
function refusal(call: Promise<unknown>): Promise<unknown> {
  return call.then(
    () => undefined,
    (err: unknown) => err,
  );
}

/**
 * A host that shuts down (its host, then its database, as a mounted host does) while a call it
 * forwarded to the session's owner waits on the owner's reply: its caller is told whether the
 * call may still take effect there.
 */
describe.skipIf(!pgUrl)(
  "a host shutting down with a forwarded call waiting, on one PostgreSQL database",
  () => {
    let cluster: Cluster | undefined;
    afterEach(async () => {
      await cluster?.dispose();
      cluster = undefined;
    });

    /** Two hosts whose forward wait no test outlives, B's metrics its own, and a new session A owns. */
    async function ownedOnA(): Promise<{
      a: Host;
      b: Host;
      sessionId: string;
      forwarded: () => Promise<string[]>;
    }> {
      const { metrics, of } = metricsFor("host-b");
      cluster = await openCluster(2, { forwardTimeoutMs: 10 * 60_000, metrics: of });
      const [a, b] = cluster.hosts as [Host, Host];
      return { a, b, sessionId: await createSession(a.host), forwarded: () => forwardedCalls(metrics) };
    }

    async function shutDown(host: Host): Promise<void> {
      await host.host.shutdown();
      await host.inbox.close();
    }

    it("a prompt its owner took and runs is answered outcome_unknown, not retryable: it runs there once", async () => {
      const { a, b, sessionId, forwarded } = await ownedOnA();
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
      expect(await forwarded()).toEqual(['sessionmux_forwarded_calls_total{outcome="unknown"} 1']);
    }, 30_000);

    it("a prompt its owner has not claimed is taken back: host_shutting_down, retryable, and it never reaches the owner", async () => {
      const { a, b, sessionId } = await ownedOnA();
      // A holds its lease and claims nothing
      await a.inbox.close();
      const sent = refusal(b.host.call(ALICE, "session.prompt", { sessionId, ...prompt("never taken") }));
      const db = new pg.Client({ connectionString: pgUrl! });
      await db.connect();
      try {
        const rows = async () =>
          (await db.query(`SELECT 1 FROM "${cluster!.schema}".forwarded_calls WHERE target_host = 'host-a'`))
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
