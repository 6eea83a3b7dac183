/**
 * PostgreSQL store benchmark (`npm run bench:pg`): acknowledged appends from 100 concurrent writers
 * through `PostgresSessionStore` against a raw batched insert with the same driver (`pg`) and the
 * same durability (`synchronous_commit = on`), alternated in one run; then the latency from a commit
 * on store instance A to the commit notice on instance B (LISTEN/NOTIFY, loopback). Bounded in
 * count; each phase runs in a schema of its own, dropped at the end.
 * Usage: node --import tsx bench/pg-append.bench.ts [postgres-url]
 */
import { randomBytes } from "node:crypto";
import { cpus, loadavg } from "node:os";
import pg from "pg";
import { encodeValue } from "../src/store/event-codec.js";
import { openPool } from "../src/store/postgres/pg-pool.js";
import { PostgresSessionStore } from "../src/store/postgres/postgres-store.js";

const URL =
  process.argv[2] ?? process.env.SESSIONMUX_TEST_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test";
const WRITERS = 100;
const APPENDS_PER_WRITER = 30;
const ROUNDS = 3;
const LATENCY_SAMPLES = 300;
/** Every phase gives up past this, so a stuck database cannot hang the run. */
const PHASE_LIMIT_MS = 120_000;

const ids = Array.from({ length: WRITERS }, (_, i) => `bench-${i}`);
const deltaData = (i: number) => ({ turnId: "t", text: `token ${i} of a streamed answer` });
const rate = (count: number, ms: number) => (count * 1000) / ms;
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
const percentile = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))]!;
const newSchema = (name: string) => `bench_${name}_${randomBytes(4).toString("hex")}`;

async function bounded<T>(label: string, run: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const limit = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${label} exceeded ${PHASE_LIMIT_MS} ms`)), PHASE_LIMIT_MS);
  });
  try {
    return await Promise.race([run, limit]);
  } finally {
    clearTimeout(timer);
  }
}

async function dropSchema(schema: string): Promise<void> {
  const client = new pg.Client({ connectionString: URL });
  await client.connect();
  await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await client.end();
}

/** Raw: per round one transaction inserting one row per writer with one `unnest` statement. */
async function rawBatchedInsert(): Promise<number> {
  const schema = newSchema("raw");
  const setup = new pg.Client({ connectionString: URL });
  await setup.connect();
  await setup.query(`CREATE SCHEMA "${schema}"`);
  await setup.end();
  const pool = openPool(URL, { schema, max: 2 });
  try {
    await pool.query(`CREATE TABLE events (session_id text COLLATE "C" NOT NULL, seq bigint NOT NULL,
      type text NOT NULL, at bigint NOT NULL, data bytea NOT NULL, PRIMARY KEY (session_id, seq))`);
    const client = await pool.connect();
    const started = performance.now();
    try {
      for (let seq = 1; seq <= APPENDS_PER_WRITER; seq++) {
        await client.query("BEGIN");
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
    return rate(WRITERS * APPENDS_PER_WRITER, performance.now() - started);
  } finally {
    await pool.end();
    await dropSchema(schema);
  }
}

/** The store: `WRITERS` concurrent writers, each awaiting one acknowledged `append` at a time. */
async function storeAppends(): Promise<{ rate: number; transactions: number }> {
  const schema = newSchema("store");
  const store = await PostgresSessionStore.open(URL, { schema });
  try {
    await Promise.all(ids.map((sessionId) => store.create({ sessionId, owner: "bench", model: "demo" })));
    const before = store.stats().transactions;
    const started = performance.now();
    await Promise.all(
      ids.map(async (sessionId, i) => {
        for (let n = 0; n < APPENDS_PER_WRITER; n++) {
          const outcome = await store.append(sessionId, [{ type: "assistant/delta", data: deltaData(i) }]);
          if (outcome.status !== "appended") throw new Error(`append: ${outcome.status}`);
        }
      }),
    );
    const elapsed = performance.now() - started;
    return {
      rate: rate(WRITERS * APPENDS_PER_WRITER, elapsed),
      transactions: store.stats().transactions - before,
    };
  } finally {
    await store.close();
    await dropSchema(schema);
  }
}

/** Commit on A (its local notice, right after COMMIT) to the notice on B, one append at a time. */
async function remoteNoticeLatency(): Promise<{ p50: number; p99: number; max: number }> {
  const schema = newSchema("notice");
  const a = await PostgresSessionStore.open(URL, { schema });
  const b = await PostgresSessionStore.open(URL, { schema });
  try {
    await a.create({ sessionId: "s", owner: "bench", model: "demo" });
    const committedAt = new Map<number, number>();
    const waits = new Map<number, () => void>();
    const latencies: number[] = [];
    a.subscribe("s", (notice) => {
      if (notice.kind === "append") for (const e of notice.events) committedAt.set(e.seq, performance.now());
    });
    b.subscribe("s", (notice) => {
      if (notice.kind !== "append") return;
      const now = performance.now();
      for (const e of notice.events) {
        const at = committedAt.get(e.seq);
        if (at !== undefined) latencies.push(now - at);
        waits.get(e.seq)?.();
      }
    });
    for (let i = 0; i < LATENCY_SAMPLES; i++) {
      const seq = i + 2;
      const seen = new Promise<void>((resolve) => waits.set(seq, resolve));
      await a.append("s", [{ type: "assistant/delta", data: deltaData(i) }]);
      await seen;
      waits.delete(seq);
    }
    latencies.sort((x, y) => x - y);
    return { p50: percentile(latencies, 50), p99: percentile(latencies, 99), max: latencies.at(-1)! };
  } finally {
    await a.close();
    await b.close();
    await dropSchema(schema);
  }
}

console.log(`# PostgreSQL store benchmark: ${cpus().length} cores, load ${loadavg()[0]!.toFixed(2)}, ${URL}`);
const raw: number[] = [];
const stored: number[] = [];
let transactions = 0;
for (let round = 0; round < ROUNDS; round++) {
  raw.push(await bounded("raw batched insert", rawBatchedInsert()));
  const result = await bounded("store appends", storeAppends());
  stored.push(result.rate);
  transactions = result.transactions;
}
const ratio = median(stored) / median(raw);
console.log(
  `append, ${WRITERS} writers x ${APPENDS_PER_WRITER}: store ${median(stored).toFixed(0)}/s ` +
    `(${transactions} transactions), raw batched insert ${median(raw).toFixed(0)}/s, ` +
    `ratio ${ratio.toFixed(2)}x (goal >= 0.8x; medians of ${ROUNDS})`,
);
const latency = await bounded("notice latency", remoteNoticeLatency());
console.log(
  `commit on A -> notice on B (LISTEN/NOTIFY, loopback), ${LATENCY_SAMPLES} samples: ` +
    `p50 ${latency.p50.toFixed(2)} ms, p99 ${latency.p99.toFixed(2)} ms, max ${latency.max.toFixed(2)} ms`,
);
