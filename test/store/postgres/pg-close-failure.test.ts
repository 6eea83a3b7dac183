import type pg from "pg";
import { describe, expect, inject, it } from "vitest";
import { openHostDatabase } from "../../../src/operations/host-database.js";
import { PostgresSessionStore } from "../../../src/store/postgres/postgres-store.js";
import { cleanupsAfterEach } from "../../support/cleanups.js";
import { until } from "../../support/until.js";
import { hostConnections, type ScratchDatabase, scratchDatabase } from "./scratch-database.js";

/**
 * A close step that fails (a pool's `end`, the upload sweeper's) does not leave the steps after it
 * undone: every pool and listener is closed, and the first failure is what close rejects with.
 * Each test has a database of its own, so its connections are counted apart from other tests'.
 */

const pgUrl = inject("pgUrl");
const cleanups = cleanupsAfterEach();
const metrics = { committed: () => undefined };

async function newDatabase(): Promise<ScratchDatabase> {
  const scratch = await scratchDatabase(pgUrl!, "smx_close");
  cleanups.push(() => scratch.drop());
  return scratch;
}

/** `pool.end` ends the pool, then fails, as an end whose last socket errored does. */
function failingEnd(pool: pg.Pool, failure: Error): void {
  const end = pool.end.bind(pool);
  pool.end = (async () => {
    await end();
    throw failure;
  }) as typeof pool.end;
}

describe.skipIf(!pgUrl)("closing a PostgreSQL store when one step fails", () => {
  it("ends the store's other pool and its listener, and rejects with that failure", async () => {
    const scratch = await newDatabase();
    const store = await PostgresSessionStore.open(scratch.url, { metrics });
    // a write, so the group commit's pool holds a connection too
    await store.create({ sessionId: "s1", owner: "alice", model: "demo" });
    const pools = store as unknown as { writerPool: pg.Pool; pool: pg.Pool };
    const failure = new Error("writer pool end failed");
    failingEnd(pools.writerPool, failure);
    expect(await hostConnections(scratch)).toBeGreaterThan(0);

    await expect(store.close()).rejects.toBe(failure);
    expect(pools.pool.ended).toBe(true);
    await until(async () => (await hostConnections(scratch)) === 0, 5_000, "no connection of the store left");
  });

  it("as a host database: the inbox and the store are closed after the upload sweeper's close failed", async () => {
    const scratch = await newDatabase();
    const database = await openHostDatabase({ db: scratch.url, hostId: "h1", metrics });
    await database.ready();
    const failure = new Error("upload sweeper close failed");
    const uploads = database.uploads as typeof database.uploads & { close(): Promise<void> };
    const close = uploads.close.bind(uploads);
    uploads.close = async () => {
      await close();
      throw failure;
    };
    expect(await hostConnections(scratch)).toBeGreaterThan(0);

    await expect(database.close()).rejects.toBe(failure);
    await until(async () => (await hostConnections(scratch)) === 0, 5_000, "no connection of the host left");
  });
});
