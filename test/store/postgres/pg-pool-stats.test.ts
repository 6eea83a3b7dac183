import { randomBytes } from "node:crypto";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { PostgresSessionStore } from "../../../src/store/postgres/postgres-store.js";
import { HostMetrics } from "../../../src/transport/metrics.js";
import { cleanupsAfterEach } from "../../support/cleanups.js";
import { dropSchema, pgUrl } from "../contract/backends.js";

const cleanups = cleanupsAfterEach();

/** The store's pool series as `/metrics` serves them. */
async function poolSeries(metrics: HostMetrics): Promise<string[]> {
  return (await metrics.registry.metrics()).split("\n").filter((line) => /^sessionmux_db_/.test(line));
}

describe.skipIf(!pgUrl)("a PostgreSQL store's connection pools, as an operator sees them", () => {
  it("count busy and idle connections and the reads waiting for one, at each scrape", async () => {
    const schema = `pool_${randomBytes(4).toString("hex")}`;
    const store = await PostgresSessionStore.open(pgUrl!, { schema, maxConnections: 1 });
    cleanups.push(() => dropSchema(pgUrl!, schema));
    cleanups.push(() => store.close());
    await store.create({ sessionId: "s", owner: "alice", model: "demo" });
    const metrics = new HostMetrics();
    metrics.databasePools(() => store.poolStats());
    expect(store.poolStats()).toEqual({
      reads: { total: 1, idle: 1, waiting: 0 },
      writer: { total: 1, idle: 1, waiting: 0 },
    });
    // another connection holds the log locked: the store's one read connection waits on it, and a
    // second read waits for that connection
    const locker = new pg.Client({ connectionString: pgUrl! });
    await locker.connect();
    cleanups.push(() => locker.end());
    await locker.query(`BEGIN; LOCK TABLE "${schema}".events IN ACCESS EXCLUSIVE MODE`);
    const reads = [store.readAfter("s", 0, 10), store.readAfter("s", 0, 10)];
    await expect.poll(() => store.poolStats().reads).toEqual({ total: 1, idle: 0, waiting: 1 });
    expect(await poolSeries(metrics)).toEqual([
      'sessionmux_db_connections{pool="reads",state="idle"} 0',
      'sessionmux_db_connections{pool="reads",state="busy"} 1',
      'sessionmux_db_connections{pool="writer",state="idle"} 1',
      'sessionmux_db_connections{pool="writer",state="busy"} 0',
      'sessionmux_db_waiting{pool="reads"} 1',
      'sessionmux_db_waiting{pool="writer"} 0',
    ]);
    await locker.query("COMMIT");
    for (const read of await Promise.all(reads)) expect(read.status).toBe("ok");
    await expect.poll(() => store.poolStats().reads).toEqual({ total: 1, idle: 1, waiting: 0 });
    expect(await poolSeries(metrics)).toEqual([
      'sessionmux_db_connections{pool="reads",state="idle"} 1',
      'sessionmux_db_connections{pool="reads",state="busy"} 0',
      'sessionmux_db_connections{pool="writer",state="idle"} 1',
      'sessionmux_db_connections{pool="writer",state="busy"} 0',
      'sessionmux_db_waiting{pool="reads"} 0',
      'sessionmux_db_waiting{pool="writer"} 0',
    ]);
  });

  it("serves no pool series for a store without pools", async () => {
    expect(await poolSeries(new HostMetrics())).toEqual([]);
  });
});
