import pg from "pg";
import { describe, expect, inject, it } from "vitest";
import type { SessionEvent } from "../../protocol/index.js";
import { readWholeLog } from "../support/whole-log.js";
import { CLUSTER_TEST_TIMEOUT_MS, oneTo, threeHosts } from "./cluster.js";
import { clusterFixture } from "./cluster-fixture.js";
import { pgClientPorts } from "./process-pg-ports.js";
import type { ServeProcess } from "./serve-process.js";

const pgUrl = inject("pgUrl");
const fixture = clusterFixture(pgUrl);

const peer = fixture.peer;

/**
 * SIGSTOPs `host` at a moment PostgreSQL shows it `inside` an open transaction (one of its
 * connections idle in a transaction: its row locks stay held) or between transactions (none of its
 * connections busy), resuming and retrying otherwise.
 */
async function pauseWhere(host: ServeProcess, where: "inside" | "between"): Promise<boolean> {
  const client = new pg.Client({ connectionString: pgUrl! });
  await client.connect();
  try {
    for (let attempt = 0; attempt < 100; attempt++) {
      host.pause();
      await new Promise((resolve) => setTimeout(resolve, 50));
      const { rows } = await client.query<{ state: string }>(
        "SELECT state FROM pg_stat_activity WHERE client_port = ANY($1::int[])",
        [pgClientPorts(host.child.pid!)],
      );
      const inTransaction = rows.some((row) => row.state === "idle in transaction");
      const busy = rows.some((row) => row.state !== "idle");
      if (where === "inside" ? inTransaction : rows.length > 0 && !busy) return true;
      host.resume();
      await new Promise((resolve) => setTimeout(resolve, 3 + Math.random() * 20));
    }
    return false;
  } finally {
    await client.end();
  }
}

const turnIdOf = (event: SessionEvent) => (event.data as { turnId?: string }).turnId;

describe.skipIf(!pgUrl)("an owner paused past its lease (SIGSTOP), then resumed (SIGCONT)", () => {
  it.each([
    ["between two transactions: its next append is refused by the fence", "between"],
    ["inside a transaction: PostgreSQL ends it, so its locks cannot block the takeover", "inside"],
  ] as const)(
    "paused %s; nothing it wrote after losing the lease is in the log",
    async (_title, where) => {
      const cluster = await fixture.start();
      const [a, b, c] = threeHosts(cluster);
      const owner = await peer(a.wsUrl);
      const onB = await peer(b.wsUrl);
      const onC = await peer(c.wsUrl);
      await owner.call("session.create", { sessionId: "fence" });
      const followC = onC.follow("fence");
      await owner.call("session.prompt", {
        sessionId: "fence",
        text: "/stream 5000 10",
        clientMessageId: "p1",
      });
      await expect
        .poll(() => onC.events(followC).filter((e) => e.type === "assistant/delta").length, {
          timeout: 60_000,
        })
        .toBeGreaterThanOrEqual(5);
      const firstTurn = turnIdOf(onC.events(followC).find((e) => e.type === "turn/start")!)!;
      const before = await cluster.reader.leaseHolder("fence");
      expect(before?.hostId).toBe(a.hostId);

      // A's appends to a session it keeps are one pipelined round trip that never waits on A inside
      // the transaction; creations on A (which read first) keep its writer inside transactions
      // that wait on it, with the stream's appends batched in.
      const busy = where === "inside" ? await peer(a.wsUrl) : undefined;
      let creating = busy !== undefined;
      const creations = Array.from({ length: busy ? 4 : 0 }, async (_, loop) => {
        for (let i = 0; creating; i++)
          await busy!.call("session.create", { sessionId: `busy-${loop}-${i}` }).catch(() => undefined);
      });
      expect(await pauseWhere(a, where)).toBe(true);
      creating = false;
      busy?.ws.terminate();
      owner.ws.terminate();
      // PostgreSQL's clock says when the lease ran out; nobody holds it until a host takes it
      await expect.poll(() => cluster!.reader.leaseHolder("fence"), { timeout: 60_000 }).toBeNull();
      await onB.call(
        "session.prompt",
        { sessionId: "fence", text: "taken over", clientMessageId: "p2" },
        90_000,
      );
      const ends = () => onC.events(followC).filter((e) => e.type === "turn/end");
      await expect.poll(() => ends().length, { timeout: 90_000 }).toBe(2);
      expect(ends().map((e) => (e.data as { state: string }).state)).toEqual(["interrupted", "completed"]);
      const after = await cluster.reader.leaseHolder("fence");
      expect(after?.hostId).toBe(b.hostId);
      expect(after!.generation).toBeGreaterThan(before!.generation);

      // A runs again, in the middle of its turn: its next append carries the old generation (or
      // its transaction was ended), and its lease renewal is refused: it stops the agent
      const logged = a.log().length;
      a.resume();
      await expect
        .poll(() => a.log().slice(logged), { timeout: 60_000 })
        .toMatch(/"msg":"session lease lost: its agent stops here"/);

      const read = await readWholeLog(cluster.reader, "fence");
      if (read.status !== "ok") throw new Error(read.status);
      const log = read.events;
      expect(log.map((e) => e.seq)).toEqual(oneTo(log.length));
      const firstEnd = log.findIndex((e) => e.type === "turn/end" && turnIdOf(e) === firstTurn);
      expect(firstEnd).toBeGreaterThan(0);
      expect((log[firstEnd]!.data as { state: string }).state).toBe("interrupted");
      // not one event of A's turn after B closed it
      expect(log.slice(firstEnd + 1).filter((e) => turnIdOf(e) === firstTurn)).toEqual([]);
      expect(onC.violations).toEqual([]);
      await Promise.all(creations);
    },
    CLUSTER_TEST_TIMEOUT_MS,
  );
});
