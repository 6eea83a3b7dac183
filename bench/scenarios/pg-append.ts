import { randomBytes } from "node:crypto";
import pg from "pg";
import { encodeValue } from "../../src/store/event-codec.js";
import { openPool } from "../../src/store/postgres/pg-pool.js";
import { PostgresSessionStore } from "../../src/store/postgres/postgres-store.js";
import type { AppendOptions } from "../../src/store/session-store.js";
import { type AppendShape, timedAppends } from "../harness/timed-writers.js";

export const DEFAULT_PG_URL =
  process.env.SESSIONMUX_TEST_PG_URL ??
  process.env.SESSIONMUX_BENCH_PG_URL ??
  "postgres://postgres@127.0.0.1:5432/test";

/** Every phase gives up past this, so a stuck database cannot hang the run. */
const PHASE_LIMIT_MS = 120_000;

const deltaData = (i: number) => ({ turnId: "t", text: `token ${i} of a streamed answer` });
const rate = (count: number, ms: number) => (count * 1000) / ms;
export const median = (values: readonly number[]) =>
  [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
export const newSchema = (name: string) => `bench_${name}_${randomBytes(4).toString("hex")}`;

export async function bounded<T>(label: string, run: Promise<T>, limitMs = PHASE_LIMIT_MS): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const limit = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${label} exceeded ${limitMs} ms`)), limitMs);
  });
  try {
    return await Promise.race([run, limit]);
  } finally {
    clearTimeout(timer);
  }
}

export async function dropSchema(url: string, schema: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  } finally {
    await client.end();
  }
}

const LOCK_SESSIONS = `SELECT count(*) FROM (SELECT session_id FROM sessions
  WHERE session_id = ANY($1::text[]) ORDER BY session_id FOR UPDATE) AS locked`;

const idsOf = (shape: AppendShape) => Array.from({ length: shape.writers }, (_, i) => `bench-${i}`);

/** A subject set up once (schema, tables, sessions); each `run` adds `appendsPerWriter` per writer. */
export interface PgAppender<R> {
  run(): Promise<R>;
  close(): Promise<void>;
}

/**
 * The baseline: the same rows with the same driver (`pg`) and durability (`synchronous_commit =
 * on`), as fast as PostgreSQL takes them: per round one transaction inserting one row per writer
 * with one `unnest` statement, no head, no projection, no notice. `locked`: each transaction first
 * locks one row per writer's session `FOR UPDATE` in id order, as every store write does to keep
 * one writer per session across hosts: the floor of a store that keeps that rule.
 */
export async function openRawPgInserts(
  url: string,
  shape: AppendShape,
  locked = false,
): Promise<PgAppender<number>> {
  const ids = idsOf(shape);
  const schema = newSchema("raw");
  const setup = new pg.Client({ connectionString: url });
  await setup.connect();
  await setup.query(`CREATE SCHEMA "${schema}"`);
  await setup.end();
  const pool = openPool(url, { schema, max: 2 });
  const close = async () => {
    await pool.end();
    await dropSchema(url, schema);
  };
  try {
    await pool.query(`CREATE TABLE events (session_id text COLLATE "C" NOT NULL, seq bigint NOT NULL,
      type text NOT NULL, at bigint NOT NULL, data bytea NOT NULL, PRIMARY KEY (session_id, seq))`);
    if (locked) {
      await pool.query(`CREATE TABLE sessions (session_id text COLLATE "C" PRIMARY KEY)`);
      await pool.query("INSERT INTO sessions SELECT unnest($1::text[])", [ids]);
    }
  } catch (error) {
    await close();
    throw error;
  }
  let head = 0;
  return {
    async run() {
      const client = await pool.connect();
      const started = performance.now();
      try {
        for (let n = 0; n < shape.appendsPerWriter; n++) {
          const seq = ++head;
          await client.query("BEGIN");
          if (locked) await client.query(LOCK_SESSIONS, [ids]);
          await client.query(
            `INSERT INTO events SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::bigint[], $5::bytea[])`,
            [
              ids,
              ids.map(() => seq),
              ids.map(() => "assistant/delta"),
              ids.map(() => Date.now()),
              ids.map((_, i) => Buffer.from(encodeValue(deltaData(i)))),
            ],
          );
          await client.query("COMMIT");
        }
      } finally {
        client.release();
      }
      return rate(shape.writers * shape.appendsPerWriter, performance.now() - started);
    },
    close,
  };
}

/**
 * The store: `writers` concurrent writers, each awaiting one acknowledged `append` at a time;
 * `fenced`: each append carries its session's lease, as a host's agent writes on several hosts.
 */
export async function openPgStoreAppends(
  url: string,
  shape: AppendShape,
  fenced = false,
): Promise<PgAppender<{ rate: number; transactions: number }>> {
  const ids = idsOf(shape);
  const schema = newSchema("store");
  const store = await PostgresSessionStore.open(url, { schema });
  const close = async () => {
    await store.close();
    await dropSchema(url, schema);
  };
  let fences: AppendOptions[];
  try {
    await Promise.all(ids.map((sessionId) => store.create({ sessionId, owner: "bench", model: "demo" })));
    fences = await Promise.all(
      ids.map(async (sessionId) => {
        if (!fenced) return {};
        const taken = await store.acquireLease(sessionId, "bench-host", PHASE_LIMIT_MS);
        if (taken.status !== "acquired") throw new Error(`lease: ${taken.status}`);
        return { fence: taken.lease };
      }),
    );
  } catch (error) {
    await close();
    throw error;
  }
  return {
    async run() {
      const delta = (i: number) => ({ type: "assistant/delta" as const, data: deltaData(i) });
      const { total, ms, transactions } = await timedAppends(store, ids, shape, delta, fences);
      return { rate: rate(total, ms), transactions };
    },
    close,
  };
}

/** One run on a subject of its own: set up, run, torn down. */
async function once<R>(open: Promise<PgAppender<R>>): Promise<R> {
  const appender = await open;
  try {
    return await appender.run();
  } finally {
    await appender.close();
  }
}

export const rawPgBatchedInsert = (url: string, shape: AppendShape, locked = false): Promise<number> =>
  once(openRawPgInserts(url, shape, locked));

export const pgStoreAppends = (
  url: string,
  shape: AppendShape,
  fenced = false,
): Promise<{ rate: number; transactions: number }> => once(openPgStoreAppends(url, shape, fenced));

export interface PgAppendRounds {
  store: number[];
  /** The store with every append fenced by its session's lease. */
  fenced: number[];
  raw: number[];
  /** The raw insert behind a `FOR UPDATE` of its sessions' rows (see `openRawPgInserts`). */
  locked: number[];
  /** Group-commit transactions of the last store round. */
  transactions: number;
}

/**
 * Alternates raw and store rounds (raw first in even rounds, store first in odd ones), so drift
 * in the machine's load falls on both alike; the medians are compared.
 */
export async function pgAppendRounds(
  url: string,
  shape: AppendShape,
  rounds: number,
): Promise<PgAppendRounds> {
  const result: PgAppendRounds = { store: [], fenced: [], raw: [], locked: [], transactions: 0 };
  const raw = async () => {
    result.raw.push(await bounded("raw batched insert", rawPgBatchedInsert(url, shape)));
    result.locked.push(await bounded("row-locked raw insert", rawPgBatchedInsert(url, shape, true)));
  };
  const store = async () => {
    const measured = await bounded("store appends", pgStoreAppends(url, shape));
    result.store.push(measured.rate);
    result.transactions = measured.transactions;
    result.fenced.push((await bounded("fenced store appends", pgStoreAppends(url, shape, true))).rate);
  };
  for (let round = 0; round < rounds; round++) {
    if (round % 2 === 0) {
      await raw();
      await store();
    } else {
      await store();
      await raw();
    }
  }
  return result;
}
