import { randomBytes } from "node:crypto";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { PostgresSessionStore } from "../../../src/store/postgres/postgres-store.js";
import { cleanupsAfterEach } from "../../support/cleanups.js";
import { until } from "../../support/until.js";
import { dropSchema, pgUrl } from "../contract/backends.js";
import { userMessage } from "../open-store.js";

const cleanups = cleanupsAfterEach();

/** A store of four pooled connections (two for searches) holding one message, and search_docs locked. */
async function storeWithSearchesHeld() {
  const schema = `search_share_${randomBytes(4).toString("hex")}`;
  const store = await PostgresSessionStore.open(pgUrl!, {
    schema,
    maxConnections: 4,
    searchStatementTimeoutMs: 5_000,
  });
  cleanups.push(() => dropSchema(pgUrl!, schema));
  cleanups.push(() => store.close());
  await store.create({ sessionId: "s", owner: "alice", model: "m" });
  await store.append("s", [userMessage("zebra crossing")]);
  // another connection holds the search index against every reader: each search waits on it
  const locker = new pg.Client({ connectionString: pgUrl! });
  await locker.connect();
  cleanups.push(() => locker.end());
  await locker.query("BEGIN");
  await locker.query(`LOCK TABLE ${schema}.search_docs IN ACCESS EXCLUSIVE MODE`);
  const waiting = async () =>
    (
      await locker.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM pg_stat_activity WHERE pg_backend_pid() = ANY(pg_blocking_pids(pid))",
      )
    ).rows[0]!.n;
  return { store, waiting, release: () => locker.query("ROLLBACK") };
}

/** Both search connections handed out, the first search waiting on the lock. */
async function searchesHeld(store: PostgresSessionStore, waiting: () => Promise<number>): Promise<void> {
  await until(
    async () => {
      const { total, idle } = store.poolStats().reads;
      return total === 2 && idle === 0 && (await waiting()) > 0;
    },
    10_000,
    "two searches holding connections",
  );
}

describe.skipIf(!pgUrl)("a PostgreSQL store's searches and its read pool", () => {
  it("hold at most half of it: reads and a principal's page are answered while one principal's searches all wait", async () => {
    const { store, waiting, release } = await storeWithSearchesHeld();
    let settled = 0;
    const searches = Array.from({ length: 6 }, () =>
      store
        .search("zebra", 10, "alice", { name: "alice" })
        .catch((err: unknown) => err)
        .finally(() => settled++),
    );
    await searchesHeld(store, waiting);
    // the other half of the pool serves the rest of the host: with every connection held by a
    // search, these waited until the searches' statements were stopped
    expect((await store.list({ limit: 10 })).rows.map((row) => row.sessionId)).toEqual(["s"]);
    expect(await store.page("s", { limit: 10 })).toMatchObject({ status: "ok", headSeq: 2 });
    expect(settled).toBe(0);
    await release();
    for (const answer of await Promise.all(searches)) expect(answer).toHaveLength(1);
  });

  it("never give a connection to a search whose asker left while it waited for one: it fails aborted at once", async () => {
    const { store, waiting, release } = await storeWithSearchesHeld();
    const held = [0, 1].map(() => store.search("zebra", 10, "alice", { name: "alice" }));
    await searchesHeld(store, waiting);
    const left = new AbortController();
    const gone = store.search("zebra", 10, "bob", { name: "bob", signal: left.signal });
    left.abort();
    await expect(gone).rejects.toMatchObject({ code: "aborted" });
    // it never took a connection
    expect(store.poolStats().reads.total).toBe(2);
    await release();
    for (const answer of await Promise.all(held)) expect(answer).toHaveLength(1);
  });
});
