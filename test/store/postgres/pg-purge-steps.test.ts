import { randomBytes } from "node:crypto";
import type pg from "pg";
import { describe, expect, it, vi } from "vitest";
import { openPool } from "../../../src/store/postgres/pg-pool.js";
import { PG_PURGE_STEP, PgPurger } from "../../../src/store/postgres/pg-purger.js";
import { PostgresSessionStore } from "../../../src/store/postgres/postgres-store.js";
import type { PurgeStep } from "../../../src/store/sqlite-purger.js";
import { cleanupsAfterEach } from "../../support/cleanups.js";
import { dropSchema, pgUrl } from "../contract/backends.js";
import { writeLeftToPurge } from "../purge-fixture.js";

const cleanups = cleanupsAfterEach(() => vi.restoreAllMocks());

/** The tables a purge deletes from, each row named by its key, in the order the purge takes them. */
const TABLES = [
  "events",
  "search_docs",
  "interactions",
  "session_interactions",
  "prompt_keys",
  "jobs",
  "dismissals",
  "chunks",
  "attachments",
  "purges",
] as const;
type Table = (typeof TABLES)[number];

/** A schema holding `writeLeftToPurge`'s sessions, whose purges no step has run yet. */
async function leftToPurge(): Promise<string> {
  const schema = `purge_steps_${randomBytes(5).toString("hex")}`;
  cleanups.push(() => dropSchema(pgUrl!, schema));
  const held = vi.spyOn(PgPurger.prototype, "step").mockResolvedValue(false);
  const store = await PostgresSessionStore.open(pgUrl!, { schema, maxConnections: 4 });
  await writeLeftToPurge(store);
  await store.close();
  held.mockRestore();
  return schema;
}

/**
 * A pool on the schema whose connections note every statement they run (the pool's own queries
 * too); `failAfter`, set, fails the next statement that starts with it once it has run.
 */
function recordedPool(schema: string) {
  const pool = openPool(pgUrl!, { schema, max: 3 });
  cleanups.push(() => pool.end());
  const statements: string[] = [];
  const failing: { after?: string; error?: Error } = {};
  const recorded = {
    query: (sql: string, params?: unknown[]) => {
      statements.push(sql);
      return pool.query(sql, params);
    },
    async connect() {
      const client = await pool.connect();
      return new Proxy(client, {
        get(target, name, receiver) {
          if (name !== "query") return Reflect.get(target, name, receiver);
          return async (sql: string, params?: unknown[]) => {
            statements.push(sql);
            const result = await target.query(sql, params);
            if (failing.after && sql.startsWith(failing.after)) {
              failing.after = undefined;
              throw failing.error;
            }
            return result;
          };
        },
      });
    },
  } as unknown as pg.Pool;
  return { pool, recorded, statements, failing };
}

async function purgerOf(schema: string, step?: Partial<PurgeStep>, pollMs?: number) {
  const { pool, recorded, statements, failing } = recordedPool(schema);
  const errors: unknown[] = [];
  const purger = new PgPurger(recorded, step, (err) => errors.push(err), pollMs);
  cleanups.push(() => purger.stop());
  const ids = async (sql: string, params: unknown[]) =>
    (await pool.query<{ id: string | number }>(sql, params)).rows.map((row) => row.id);
  const keyOf = async (sessionId: string) =>
    (
      await pool.query<{ log_key: string }>(
        "SELECT log_key FROM purges WHERE log_key = $1 OR log_key LIKE $1 || ':%'",
        [sessionId],
      )
    ).rows[0]?.log_key ??
    (
      await pool.query<{ log_key: string }>(
        "SELECT coalesce(log_key, session_id) AS log_key FROM projections WHERE session_id = $1",
        [sessionId],
      )
    ).rows[0]!.log_key;
  /** The rows a purge of the session under `key` would delete, or its live ones, by table. */
  const rows = async (sessionId: string, key: string): Promise<Record<Table, (string | number)[]>> => ({
    events: await ids("SELECT seq AS id FROM events WHERE session_id = $1 ORDER BY seq", [key]),
    search_docs: await ids("SELECT id FROM search_docs WHERE session_id = $1 ORDER BY id", [key]),
    interactions: await ids(
      "SELECT interaction_id AS id FROM interactions WHERE log_key = $1 ORDER BY interaction_id",
      [key],
    ),
    session_interactions: await ids(
      "SELECT interaction_id AS id FROM interactions WHERE session_id = $1 AND log_key IS NULL ORDER BY turn_id",
      [sessionId],
    ),
    prompt_keys: await ids(
      "SELECT client_message_id AS id FROM prompt_keys WHERE session_id = $1 ORDER BY 1",
      [sessionId],
    ),
    jobs: await ids("SELECT job_id AS id FROM jobs WHERE session_id = $1 ORDER BY 1", [sessionId]),
    dismissals: await ids("SELECT principal AS id FROM dismissals WHERE session_id = $1 ORDER BY 1", [
      sessionId,
    ]),
    chunks: await ids(
      `SELECT c.attachment_id || '/' || c.idx AS id FROM attachments a
       JOIN attachment_chunks c ON c.attachment_id = a.attachment_id WHERE a.session_id = $1 ORDER BY 1`,
      [sessionId],
    ),
    attachments: await ids("SELECT attachment_id AS id FROM attachments WHERE session_id = $1 ORDER BY 1", [
      sessionId,
    ]),
    purges: await ids("SELECT log_key AS id FROM purges WHERE log_key = $1", [key]),
  });
  return {
    pool,
    purger,
    statements,
    failing,
    errors,
    keyOf,
    rows,
    /** Runs one step; answers what it deleted of the session's, as `table: rows` for each table it changed. */
    async step(sessionId: string, key: string): Promise<Record<string, (string | number)[]>> {
      const before = await rows(sessionId, key);
      expect(await purger.step()).toBe(true);
      const after = await rows(sessionId, key);
      const deleted: Record<string, (string | number)[]> = {};
      for (const table of TABLES) {
        const gone = before[table].filter((id) => !after[table].includes(id));
        if (gone.length > 0) deleted[table] = gone;
      }
      return deleted;
    },
    lengths: async (sql: string, params: unknown[]) =>
      (await pool.query<{ n: number }>(sql, params)).rows.map((row) => Number(row.n)),
  };
}

describe.skipIf(!pgUrl)(
  "a purge's steps (PostgreSQL): bounded, in order, one kind of row at a time, never a live row",
  () => {
    it("deletes a deleted session's rows a table at a time, the first `rows` of one table a step, the purge row last; a statement that found none is not run again", async () => {
      const schema = await leftToPurge();
      const purging = await purgerOf(schema, { rows: 2, bytes: 1 << 30 });
      const key = await purging.keyOf("gone");
      const all = await purging.rows("gone", key);
      expect(Object.values(all).map((ids) => ids.length)).toEqual([38, 7, 3, 0, 3, 3, 3, 3, 1, 1]);
      const kept = [
        await purging.rows("kept", await purging.keyOf("kept")),
        await purging.rows("gone-too", await purging.keyOf("gone-too")),
      ];
      const steps: Record<string, (string | number)[]>[] = [];
      const ran: string[][] = [];
      for (let i = 0; i < 60 && (await purging.rows("gone", key)).purges.length > 0; i++) {
        purging.statements.length = 0;
        steps.push(await purging.step("gone", key));
        ran.push(purging.statements.filter((sql) => sql.startsWith("DELETE")).map((sql) => sql.slice(0, 30)));
      }
      const expected: Record<string, (string | number)[]>[] = [];
      for (const table of [
        "events",
        "search_docs",
        "interactions",
        "prompt_keys",
        "jobs",
        "dismissals",
        "chunks",
      ] as const) {
        for (let at = 0; at < all[table].length; at += 2)
          expected.push({ [table]: all[table].slice(at, at + 2) });
      }
      expected.push({ attachments: all.attachments }, { purges: all.purges });
      expect(steps).toEqual(expected);
      // each step ran the statement that deleted, and before it only those that found nothing then
      // for the first time (never one already found empty at an earlier step)
      const runs = ran.flat().length;
      expect(runs).toBe(steps.length + TABLES.length - 1);
      expect(ran.at(-1)).toEqual(["DELETE FROM attachments WHERE ", "DELETE FROM purges WHERE log_k"]);
      expect([
        await purging.rows("kept", await purging.keyOf("kept")),
        await purging.rows("gone-too", await purging.keyOf("gone-too")),
      ]).toEqual(kept);

      // the cleared session's purge is next: its old epoch only, never its prompt keys, jobs,
      // dismissals or attachments (the session lives), nor its new epoch's rows
      const oldKey = await purging.keyOf("zcleared");
      const old = await purging.rows("zcleared", oldKey);
      const liveKey = (
        await purging.pool.query<{ k: string }>(
          "SELECT log_key AS k FROM projections WHERE session_id = 'zcleared'",
        )
      ).rows[0]!.k;
      expect(liveKey).not.toBe(oldKey);
      const live = await purging.rows("zcleared", liveKey);
      expect(live.events.length).toBe(1);
      const clearSteps: string[] = [];
      while ((await purging.rows("zcleared", oldKey)).purges.length > 0)
        clearSteps.push(...Object.keys(await purging.step("zcleared", oldKey)));
      expect(clearSteps).toEqual([
        ...Array(Math.ceil(old.events.length / 2)).fill("events"),
        ...Array(Math.ceil(old.search_docs.length / 2)).fill("search_docs"),
        ...Array(Math.ceil(old.interactions.length / 2)).fill("interactions"),
        "purges",
      ]);
      expect(await purging.rows("zcleared", liveKey)).toEqual(live);
      // nothing left to claim: a step says so
      expect(await purging.purger.step()).toBe(false);
      expect([
        await purging.rows("kept", await purging.keyOf("kept")),
        await purging.rows("gone-too", await purging.keyOf("gone-too")),
      ]).toEqual(kept);
    }, 60_000);

    it("a step stops at the first row that brings its bytes to the bound, one row at least; chunks as many as the bytes hold", async () => {
      const schema = await leftToPurge();
      const probe = await purgerOf(schema);
      const key = await probe.keyOf("gone");
      const events = await probe.lengths(
        "SELECT octet_length(data) AS n FROM events WHERE session_id = $1 ORDER BY seq",
        [key],
      );
      const seqs = (await probe.rows("gone", key)).events;
      const stepOf = async (step: Partial<PurgeStep>) => (await purgerOf(schema, step)).step("gone", key);
      expect(await stepOf({ rows: 100, bytes: events[0]! + events[1]! })).toEqual({
        events: seqs.slice(0, 2),
      });
      expect(await stepOf({ rows: 100, bytes: events[2]! + events[3]! + events[4]! - 1 })).toEqual({
        events: seqs.slice(2, 5),
      });
      expect(await stepOf({ rows: 100, bytes: 0 })).toEqual({ events: seqs.slice(5, 6) });
      expect(await stepOf({ rows: 0 })).toEqual({ events: seqs.slice(6, 7) });
      // the defaults, 256 rows or 1 MiB: every event left goes in one step
      expect(PG_PURGE_STEP).toEqual({ rows: 256, bytes: 1024 * 1024 });
      expect(await stepOf({})).toEqual({ events: seqs.slice(7) });

      const texts = await probe.lengths(
        "SELECT octet_length(text) AS n FROM search_docs WHERE session_id = $1 ORDER BY id",
        [key],
      );
      const docs = (await probe.rows("gone", key)).search_docs;
      expect(await stepOf({ rows: 100, bytes: texts[0]! + texts[1]! })).toEqual({
        search_docs: docs.slice(0, 2),
      });
      expect(await stepOf({ rows: 3, bytes: 1 << 30 })).toEqual({ search_docs: docs.slice(2, 5) });

      const whole = await purgerOf(schema, { rows: 1000, bytes: 1 << 30 });
      while ((await whole.rows("gone", key)).dismissals.length > 0) await whole.step("gone", key);
      const chunks = (await whole.rows("gone", key)).chunks;
      expect(chunks.length).toBe(3);
      expect(await stepOf({ rows: 100, bytes: 256 * 1024 - 1 })).toEqual({ chunks: chunks.slice(0, 1) });
      expect(await stepOf({ rows: 100, bytes: 2 * 256 * 1024 })).toEqual({ chunks: chunks.slice(1, 3) });
    }, 60_000);

    it("a purge no host runs (its host stopped) is found by the poll, with no wake", async () => {
      const schema = await leftToPurge();
      const polled = await purgerOf(schema, { rows: 1000, bytes: 1 << 30 }, 20);
      await vi.waitFor(
        async () => expect((await polled.pool.query("SELECT * FROM purges")).rowCount).toBe(0),
        {
          timeout: 20_000,
        },
      );
      expect(polled.errors).toEqual([]);
    }, 60_000);

    it("looks for pending purges only while neither stopped nor running, and starts a run only for one", async () => {
      const schema = await leftToPurge();
      const purging = await purgerOf(schema, { rows: 1 });
      const looks = () => purging.statements.filter((sql) => sql.startsWith("SELECT EXISTS")).length;
      await purging.purger.wakeIfPending();
      expect(looks()).toBe(1);
      // the run it started goes a row a step: while it runs, another look asks nothing
      await purging.purger.wakeIfPending();
      expect(looks()).toBe(1);
      // stopped: the step under way ends, none follows, and a look asks nothing either
      await purging.purger.stop();
      const begun = purging.statements.filter((sql) => sql === "BEGIN").length;
      await purging.purger.settled();
      await purging.purger.wakeIfPending();
      purging.purger.wake();
      await purging.purger.settled();
      expect(looks()).toBe(1);
      expect(purging.statements.filter((sql) => sql === "BEGIN").length).toBe(begun);
      // what it left stays for the next host
      expect((await purging.pool.query("SELECT * FROM purges")).rowCount).toBe(2);

      const next = await purgerOf(schema, { rows: 1000, bytes: 1 << 30 });
      next.purger.wake();
      await next.purger.settled();
      expect((await next.pool.query("SELECT * FROM purges")).rowCount).toBe(0);
      // nothing pending: a look starts no run (no transaction is begun)
      const idle = await purgerOf(schema);
      await idle.purger.wakeIfPending();
      await idle.purger.settled();
      expect(idle.statements).toEqual(["SELECT EXISTS (SELECT 1 FROM purges) AS any"]);
      expect([purging.errors, next.errors, idle.errors]).toEqual([[], [], []]);
    }, 60_000);

    it("a step whose statement fails deletes nothing (rolled back), fails with the error, and the next step deletes", async () => {
      const schema = await leftToPurge();
      const purging = await purgerOf(schema, { rows: 2, bytes: 1 << 30 });
      const key = await purging.keyOf("gone");
      const before = await purging.rows("gone", key);
      const lost = new Error("the connection was lost");
      Object.assign(purging.failing, { after: "DELETE FROM events", error: lost });
      await expect(purging.purger.step()).rejects.toBe(lost);
      expect(purging.statements.at(-1)).toBe("ROLLBACK");
      expect(await purging.rows("gone", key)).toEqual(before);
      expect(await purging.step("gone", key)).toEqual({ events: before.events.slice(0, 2) });
    }, 60_000);

    it("a look that fails is reported, unless the purger stopped while it waited", async () => {
      let refuse: (err: Error) => void = () => undefined;
      const pool = {
        query: () =>
          new Promise((_, reject) => {
            refuse = reject;
          }),
      } as unknown as pg.Pool;
      const errors: unknown[] = [];
      const purger = new PgPurger(pool, {}, (err) => errors.push(err));
      cleanups.push(() => purger.stop());
      const down = new Error("the database is down");
      const looked = purger.wakeIfPending();
      refuse(down);
      await looked;
      expect(errors).toEqual([down]);
      const stopping = purger.wakeIfPending();
      await purger.stop();
      refuse(new Error("the pool ended"));
      await stopping;
      expect(errors).toEqual([down]);
    });
  },
);
