import { randomBytes } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { PostgresSessionStore } from "../../../src/store/postgres/postgres-store.js";
import { cleanupsAfterEach } from "../../support/cleanups.js";
import { dropSchema, pgUrl } from "../contract/backends.js";
import { userMessage } from "../open-store.js";

const cleanups = cleanupsAfterEach();

/** A store of one pooled connection whose search statements may run `timeoutMs`, holding one message. */
async function storeWithTimeout(timeoutMs: number) {
  const schema = `search_timeout_${randomBytes(4).toString("hex")}`;
  const store = await PostgresSessionStore.open(pgUrl!, {
    schema,
    maxConnections: 1,
    searchStatementTimeoutMs: timeoutMs,
  });
  cleanups.push(() => dropSchema(pgUrl!, schema));
  cleanups.push(() => store.close());
  await store.create({ sessionId: "s", owner: "alice", model: "m" });
  await store.append("s", [userMessage("zebra crossing")]);
  return { store, schema };
}

/** Another connection holding `table` locked against every reader until its `release`. */
async function lockedTable(schema: string, table: string) {
  const locker = new pg.Client({ connectionString: pgUrl! });
  await locker.connect();
  cleanups.push(() => locker.end());
  await locker.query("BEGIN");
  await locker.query(`LOCK TABLE ${schema}.${table} IN ACCESS EXCLUSIVE MODE`);
  /** The backends now waiting on this lock, as the server sees them. */
  const waiting = async () =>
    (
      await locker.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM pg_stat_activity WHERE pg_backend_pid() = ANY(pg_blocking_pids(pid))",
      )
    ).rows[0]!.n;
  return { waiting, release: () => locker.query("ROLLBACK") };
}

describe.skipIf(!pgUrl)("a PostgreSQL store's search statements", () => {
  it("are stopped by the database once they ran past their time, the search answered overloaded and the store serving on", async () => {
    const { store, schema } = await storeWithTimeout(200);
    const lock = await lockedTable(schema, "search_docs");
    // the count waits on the lock, as it would on any statement that takes long
    const err = await store.search("zebra", 10).catch((e: unknown) => e);
    expect(err).toMatchObject({
      code: "overloaded",
      retryable: true,
      data: { limit: "search_statement_ms", max: 200 },
    });
    // the server cancelled it: nothing of the store's still waits there
    expect(await lock.waiting()).toBe(0);
    await lock.release();
    expect((await store.search("zebra", 10)).map((hit) => hit.snippet)).toEqual(["**zebra** crossing"]);
  });

  it("leave no timeout on the pooled connection for the reads and writes sent on it after them", async () => {
    const { store, schema } = await storeWithTimeout(200);
    // a search refused by the database, then one answered, on the pool's one connection
    const searchLock = await lockedTable(schema, "search_docs");
    await expect(store.search("zebra", 10)).rejects.toMatchObject({ code: "overloaded" });
    await searchLock.release();
    expect(await store.search("zebra", 10)).toHaveLength(1);
    // then another read on that pool waits on a lock for several times the search's bound, and is answered
    const lock = await lockedTable(schema, "dismissals");
    let settled = false;
    const dismissed = store.isDismissed("s", "alice").finally(() => {
      settled = true;
    });
    while (!settled && (await lock.waiting()) === 0) await sleep(10);
    await sleep(1_000);
    await lock.release();
    expect(await dismissed).toBe(false);
  });
});
