import { randomBytes } from "node:crypto";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { IDLE_IN_TRANSACTION_TIMEOUT_MS, openClient, openPool } from "../../../src/store/postgres/pg-pool.js";
import { cleanupsAfterEach } from "../../support/cleanups.js";
import { settlement } from "../../support/settlement.js";
import { until } from "../../support/until.js";
import { pgUrl } from "../contract/backends.js";

const cleanups = cleanupsAfterEach();

/** A connection of the test's own, outside any pool. */
async function adminClient(): Promise<pg.Client> {
  const admin = new pg.Client({ connectionString: pgUrl! });
  await admin.connect();
  cleanups.push(() => admin.end());
  return admin;
}

/** The settings a connection runs with, as the server reports them. */
async function settingsOf(query: (text: string) => Promise<pg.QueryResult>) {
  const { rows } = await query(
    `SELECT current_setting('search_path') AS "searchPath", current_setting('synchronous_commit') AS "synchronousCommit",
       current_setting('idle_in_transaction_session_timeout') AS "idleInTransaction", current_setting('application_name') AS "name",
       9007199254740991::bigint AS "bigint", 7::int AS "int", '12'::text AS "text"`,
  );
  return rows[0];
}

const settings = (searchPath: string, name: string) => ({
  searchPath,
  synchronousCommit: "on",
  idleInTransaction: `${IDLE_IN_TRANSACTION_TIMEOUT_MS / 1000}s`,
  name,
  // bigint columns (seq, at, counts) come back as numbers, every other type as pg reads it
  bigint: Number.MAX_SAFE_INTEGER,
  int: 7,
  text: "12",
});

describe.skipIf(!pgUrl)("a PostgreSQL store's connections", () => {
  it("run in the store's schema (public when none is given), commit to disk, end a transaction left idle, and read bigints as numbers", async () => {
    const pool = openPool(pgUrl!, { schema: "pool_settings", max: 1 });
    cleanups.push(() => pool.end());
    expect(await settingsOf((text) => pool.query(text))).toEqual(settings('"pool_settings"', "sessionmux"));
    const plain = openPool(pgUrl!, { max: 1 });
    cleanups.push(() => plain.end());
    expect(await settingsOf((text) => plain.query(text))).toEqual(settings('"public"', "sessionmux"));
    // the LISTEN connections, named apart
    const feed = openClient(pgUrl!, "sessionmux-feed", { schema: "pool_settings" });
    await feed.connect();
    cleanups.push(() => feed.end());
    expect(await settingsOf((text) => feed.query(text))).toEqual(
      settings('"pool_settings"', "sessionmux-feed"),
    );
    const calls = openClient(pgUrl!, "sessionmux-calls");
    await calls.connect();
    cleanups.push(() => calls.end());
    expect(await settingsOf((text) => calls.query(text))).toEqual(settings('"public"', "sessionmux-calls"));
  });

  it("a pool outlives a connection that ends while checked out between two queries: its next query fails, the pool connects again", async () => {
    const admin = await adminClient();
    const schema = `pool_${randomBytes(4).toString("hex")}`;
    const pool = openPool(pgUrl!, { schema, max: 1 });
    cleanups.push(() => pool.end());
    const client = await pool.connect();
    let released = false;
    cleanups.push(() => {
      if (!released) client.release(true);
    });
    const { rows } = await client.query<{ pid: number }>("SELECT pg_backend_pid() AS pid");
    // not `once`: it would listen for `error` itself
    let ended = false;
    client.on("end", () => {
      ended = true;
    });
    await admin.query("SELECT pg_terminate_backend($1)", [rows[0]!.pid]);
    await until(() => ended, 5_000, "the connection's end");
    await expect(client.query("SELECT 1")).rejects.toThrow();
    client.release();
    released = true;
    await until(() => pool.totalCount === 0, 5_000, "the ended connection dropped");
    expect((await pool.query<{ one: number }>("SELECT 1 AS one")).rows).toEqual([{ one: 1 }]);
  });

  it("ending refuses a connect waiting for a free connection, and one asked for after, host_shutting_down; it ends once the held one is released", async () => {
    const pool = openPool(pgUrl!, { max: 1 });
    const held = await pool.connect();
    const waiting = settlement(pool.query("SELECT 1"));
    await until(() => pool.waitingCount === 1, 5_000, "the query waiting for the connection");
    const ending = settlement(pool.end());
    const refused = expect.objectContaining({ code: "host_shutting_down" });
    await expect.poll(waiting, { timeout: 5_000 }).toEqual({ error: refused });
    await expect(pool.connect()).rejects.toEqual(refused);
    await expect(pool.query("SELECT 1")).rejects.toEqual(refused);
    expect(ending()).toBeUndefined();
    held.release();
    await expect.poll(ending, { timeout: 5_000 }).toEqual({ value: undefined });
  });

  it("counts no connect it refused as waiting once it ends: they leave its queue, as they left its callers", async () => {
    const pool = openPool(pgUrl!, { max: 1 });
    const held = await pool.connect();
    const waiting = [settlement(pool.query("SELECT 1")), settlement(pool.connect())];
    await until(() => pool.waitingCount === 2, 5_000, "both waiting for the connection");
    const ending = settlement(pool.end());
    await expect
      .poll(() => waiting.every((settled) => settled() !== undefined), { timeout: 5_000 })
      .toBe(true);
    // while the end still waits for the held connection, nothing waits on the pool
    expect(ending()).toBeUndefined();
    expect(pool.waitingCount).toBe(0);
    held.release();
    await expect.poll(ending, { timeout: 5_000 }).toEqual({ value: undefined });
    expect(pool.waitingCount).toBe(0);
  });

  it("ending refuses a connect whose connection is being made, and closes that connection once made instead of waiting on it", async () => {
    const pool = openPool(pgUrl!, { max: 1 });
    const making = settlement(pool.connect());
    const ending = settlement(pool.end());
    await expect.poll(making, { timeout: 5_000 }).toEqual({
      error: expect.objectContaining({ code: "host_shutting_down" }),
    });
    await expect.poll(ending, { timeout: 5_000 }).toEqual({ value: undefined });
    expect(pool.totalCount).toBe(0);
  });
});
