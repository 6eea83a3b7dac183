import pg from "pg";
import { afterEach, describe, expect, it, vi } from "vitest";
import { PgLiveReads } from "../../../src/store/postgres/pg-live-rows.js";
import { openPool } from "../../../src/store/postgres/pg-pool.js";
import { backends, pgUrl, storeFixture } from "../contract/backends.js";

/**
 * The live-state page on PostgreSQL reads five statements on one connection in one snapshot, and
 * hands the connection back to the pool outside any transaction, whether the page was read or not.
 * Its reads here run on a pool of one connection, so the next read after a page reuses it.
 */
const describePg = pgUrl ? describe : describe.skip;
const postgres = backends.find((backend) => backend.name === "postgres");
const S = "s";

describePg("PostgreSQL live-state page: one snapshot, a clean connection after", () => {
  const open = storeFixture(postgres!);
  const pools: pg.Pool[] = [];
  afterEach(async () => {
    vi.restoreAllMocks();
    await Promise.all(pools.splice(0).map((pool) => pool.end()));
  });

  /** A store writing session S (one prompt queued) and page reads on one connection of its schema. */
  async function queuedSession() {
    const under = await open();
    const pool = openPool(pgUrl!, { schema: under.schema!, max: 1 });
    pools.push(pool);
    await under.store.create({ sessionId: S, owner: "alice", model: "m" });
    await under.store.enqueuePrompt({ sessionId: S, itemId: "q1", queuedAt: 1, input: { text: "one" } });
    return { store: under.store, reads: new PgLiveReads(pool) };
  }

  it("shows a queue as it was when the page's session ids were read, though a prompt was queued before its queue was", async () => {
    const { store, reads } = await queuedSession();
    const query = pg.Client.prototype.query as (...args: unknown[]) => Promise<unknown>;
    let queuedMeanwhile = false;
    vi.spyOn(pg.Client.prototype, "query").mockImplementation(async function (
      this: pg.Client,
      ...args: unknown[]
    ) {
      const result = await query.apply(this, args);
      // right after the page listed its sessions, another writer queues a second prompt
      if (!queuedMeanwhile && String(args[0]).includes("UNION SELECT session_id FROM jobs")) {
        queuedMeanwhile = true;
        await store.enqueuePrompt({ sessionId: S, itemId: "q2", queuedAt: 2, input: { text: "two" } });
      }
      return result;
    } as typeof pg.Client.prototype.query);
    const page = await reads.page(null, 10);
    expect(queuedMeanwhile).toBe(true);
    expect(page.sessions.map((s) => [s.sessionId, s.queue.map((item) => item.itemId)])).toEqual([
      [S, ["q1"]],
    ]);
    const next = await reads.page(null, 10);
    expect(next.sessions.map((s) => s.queue.map((item) => item.itemId))).toEqual([["q1", "q2"]]);
  });

  it("leaves no transaction open on its connection: the next read sees what was written since", async () => {
    const { store, reads } = await queuedSession();
    expect((await reads.page(null, 10)).sessions).toHaveLength(1);
    await store.enqueuePrompt({ sessionId: S, itemId: "q2", queuedAt: 2, input: { text: "two" } });
    expect((await reads.queue(S)).map((item) => item.itemId)).toEqual(["q1", "q2"]);
  });

  it("rejects when a statement of the page fails, and its connection serves the next read", async () => {
    const { store, reads } = await queuedSession();
    // a limit the server refuses, inside the page's transaction
    await expect(reads.page(null, -1)).rejects.toThrow(/LIMIT must not be negative/);
    await store.enqueuePrompt({ sessionId: S, itemId: "q2", queuedAt: 2, input: { text: "two" } });
    expect((await reads.queue(S)).map((item) => item.itemId)).toEqual(["q1", "q2"]);
  });
});
