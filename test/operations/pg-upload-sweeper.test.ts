import pg from "pg";
import { describe, expect, it, vi } from "vitest";
import type { NewEvent } from "../../protocol/index.js";
import { PENDING_BYTES, pgUploadSweeper, SWEEP_STEP } from "../../src/operations/pg-upload-sweeper.js";
import { backends, type ContractStore, pgUrl, storeFixture } from "../store/contract/backends.js";
import { cleanupsAfterEach } from "../support/cleanups.js";

/**
 * The PostgreSQL sweeper of uploads no prompt references, on a store's own schema: what an owner
 * holds of them, and the expiry sweep (its interval driven by fake timers, the database real).
 */

const cleanups = cleanupsAfterEach();
const postgres = backends.find((backend) => backend.name === "postgres");

const upload = (store: ContractStore, owner: string, bytes: number) =>
  store.putAttachment({ owner, name: "f", type: "t", bytes: new Uint8Array(bytes) });

/** A prompt's message referencing the upload: from then on it is the session's. */
const referencing = (attachmentId: string, size: number): NewEvent =>
  ({
    type: "user/message",
    data: {
      messageId: `m-${attachmentId}`,
      source: "user",
      text: "see the file",
      attachments: [{ attachmentId, name: "f", type: "t", size }],
      meta: {},
    },
  }) as NewEvent;

/**
 * Two ticks of the sweeper's interval at once, then no more (fake interval timers, real everything
 * else): the second comes while the first tick's sweep is under way, and starts none of its own.
 */
function twoTicks(sweeper: ReturnType<typeof pgUploadSweeper>, ttlMs: number, errors: unknown[]): void {
  vi.useFakeTimers({ toFake: ["setInterval", "clearInterval"] });
  try {
    sweeper.start(ttlMs, 1_000, (err) => errors.push(err));
    vi.advanceTimersByTime(2_000);
    sweeper.stop();
  } finally {
    vi.useRealTimers();
  }
}

describe.runIf(postgres)("the PostgreSQL upload sweeper", () => {
  const open = storeFixture(postgres!);

  async function sweeperOn(): Promise<{
    store: ContractStore;
    schema: string;
    sweeper: ReturnType<typeof pgUploadSweeper>;
  }> {
    const { store, schema } = await open();
    const sweeper = pgUploadSweeper(pgUrl!, schema!);
    cleanups.push(() => sweeper.close());
    return { store, schema: schema!, sweeper };
  }

  /** Runs `sql` on the test database, then closes the connection. */
  async function query<R extends pg.QueryResultRow>(sql: string): Promise<R[]> {
    const client = new pg.Client({ connectionString: pgUrl! });
    await client.connect();
    try {
      return (await client.query<R>(sql)).rows;
    } finally {
      await client.end();
    }
  }

  it("counts what an owner holds of uploads no prompt references, each at least 4 KiB, and nobody else's", async () => {
    const { store, sweeper } = await sweeperOn();
    await store.create({ sessionId: "s", owner: "o", model: "m" });
    const linked = await upload(store, "o", 5000);
    await upload(store, "o", 700);
    await upload(store, "p", 5000);
    await upload(store, "p", 0);
    // each counted at least 4 KiB, an empty one too: a row each, which the quota bounds in number
    expect(await sweeper.pendingBytes("o")).toBe(5000 + 4096);
    expect(await sweeper.pendingBytes("p")).toBe(5000 + 4096);
    expect(await sweeper.pendingBytes("nobody")).toBe(0);
    await store.append("s", [referencing(linked, 5000)]);
    expect(await sweeper.pendingBytes("o")).toBe(4096);
  });

  it("one sweep deletes every expired upload, 16 a statement, never a referenced one", async () => {
    const { store, schema, sweeper } = await sweeperOn();
    // how many rows each DELETE statement on the table took, in order
    await query(`
      CREATE TABLE "${schema}".sweep_steps (step serial PRIMARY KEY, n int NOT NULL);
      CREATE FUNCTION "${schema}".count_sweep_step() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN INSERT INTO "${schema}".sweep_steps (n) SELECT count(*) FROM gone; RETURN NULL; END $$;
      CREATE TRIGGER count_sweep_step AFTER DELETE ON "${schema}".attachments
        REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION "${schema}".count_sweep_step();`);
    await store.create({ sessionId: "s", owner: "o", model: "m" });
    const linked = await upload(store, "o", 10);
    await store.append("s", [referencing(linked, 10)]);
    for (let i = 0; i < 40; i++) await upload(store, "o", 1);
    expect(await sweeper.pendingBytes("o")).toBe(40 * 4096);
    const errors: unknown[] = [];
    // a lifetime of minus a minute: every upload is past it
    twoTicks(sweeper, -60_000, errors);
    await expect.poll(() => sweeper.pendingBytes("o"), { timeout: 10_000 }).toBe(0);
    expect(errors).toEqual([]);
    expect(await store.getAttachment(linked)).not.toBeNull();
    // one sweep; no statement held more than 16 rows' locks; the last, short of 16, ended it
    const steps = await query<{ n: number }>(`SELECT n FROM "${schema}".sweep_steps ORDER BY step`);
    expect(steps.map((row) => row.n)).toEqual([16, 16, 8]);
  });

  it("finds the uploads no prompt references by index, for the quota and each sweep step, never reading the others", async () => {
    // Before, both read every attachment row, referenced ones (kept as long as their sessions)
    // included: 18 ms and 24 ms at 200,000 rows, for each upload and each sweep step.
    const { schema } = await sweeperOn();
    const client = new pg.Client({ connectionString: pgUrl! });
    await client.connect();
    try {
      // a table this small is read whole whatever its indexes: the plans as for a large one
      await client.query(`SET search_path TO "${schema}"; SET enable_seqscan = off`);
      const plan = async (sql: string, value: string | number) =>
        (await client.query<{ "QUERY PLAN": string }>(`EXPLAIN ${sql}`, [value])).rows
          .map((row) => row["QUERY PLAN"])
          .join("\n");
      const quota = await plan(PENDING_BYTES, "o");
      expect(quota).toMatch(/ on attachments_unreferenced_by_owner|using attachments_unreferenced_by_owner/);
      expect(quota).not.toMatch(/Seq Scan/);
      const step = await plan(SWEEP_STEP, 1_000);
      expect(step).toMatch(/using attachments_unreferenced_by_age|on attachments_unreferenced_by_age/);
      expect(step).not.toMatch(/Seq Scan/);
    } finally {
      await client.end();
    }
  });

  it("keeps uploads younger than their lifetime", async () => {
    const { store, schema } = await open();
    const sweeper = pgUploadSweeper(pgUrl!, schema!);
    const young = await upload(store, "o", 5);
    const errors: unknown[] = [];
    twoTicks(sweeper, 3_600_000, errors);
    // the sweep under way ends before the pool closes (closed here, not after the test)
    await sweeper.close();
    expect(errors).toEqual([]);
    expect(await store.getAttachment(young)).not.toBeNull();
    expect(await store.ownerStoredBytes("o")).toBe(5);
  });

  it("closed while it sweeps, ends after the statement under way, not after every expired upload", async () => {
    const { store, schema } = await open();
    const sweeper = pgUploadSweeper(pgUrl!, schema!);
    // each DELETE of the sweep waits, before it commits, for a lock the test holds
    const key = Math.floor(Math.random() * 2 ** 31);
    await query(`
      CREATE FUNCTION "${schema}".wait_for_test() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN PERFORM pg_advisory_xact_lock(${key}); RETURN NULL; END $$;
      CREATE TRIGGER wait_for_test AFTER DELETE ON "${schema}".attachments
        FOR EACH STATEMENT EXECUTE FUNCTION "${schema}".wait_for_test();`);
    for (let i = 0; i < 40; i++) await upload(store, "o", 1);
    const holder = new pg.Client({ connectionString: pgUrl! });
    await holder.connect();
    cleanups.push(() => holder.end());
    await holder.query("SELECT pg_advisory_lock($1)", [key]);
    const errors: unknown[] = [];
    twoTicks(sweeper, -60_000, errors);
    // the sweep's first statement waits on the lock
    await expect
      .poll(
        async () =>
          (
            await query<{ n: number }>(
              `SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND objid = ${key} AND NOT granted`,
            )
          )[0]!.n,
        { timeout: 10_000 },
      )
      .toBe(1);
    const closed = sweeper.close();
    await holder.query("SELECT pg_advisory_unlock($1)", [key]);
    await closed;
    expect(errors).toEqual([]);
    // the rest expired are the next sweep's, on this host or another
    expect(await store.ownerStoredBytes("o")).toBe(40 - 16);
  });

  it("sweeps again at every tick of its interval; stopped, keeps no timer, and closed, no connection", async () => {
    const { store, schema } = await open();
    const sweeper = pgUploadSweeper(pgUrl!, schema!);
    const first = await upload(store, "o", 1);
    const errors: unknown[] = [];
    vi.useFakeTimers({ toFake: ["setInterval", "clearInterval"] });
    try {
      sweeper.start(-60_000, 1_000, (err) => errors.push(err));
      vi.advanceTimersByTime(1_000);
      await vi.waitFor(async () => expect(await store.getAttachment(first)).toBeNull(), { timeout: 10_000 });
      // the next tick, after that sweep ended, sweeps what expired since
      const second = await upload(store, "o", 1);
      vi.advanceTimersByTime(1_000);
      await vi.waitFor(async () => expect(await store.getAttachment(second)).toBeNull(), { timeout: 10_000 });
      // stopped, it leaves no timer; closed, no connection
      sweeper.stop();
      expect(vi.getTimerCount()).toBe(0);
      expect(sweeper.poolStats().total).toBe(1);
      await sweeper.close();
      expect(sweeper.poolStats()).toEqual({ total: 0, idle: 0, waiting: 0 });
    } finally {
      vi.useRealTimers();
    }
    expect(errors).toEqual([]);
  });
});
