/**
 * PostgreSQL store benchmark (`npm run bench:pg`): acknowledged appends from 100 concurrent writers
 * through `PostgresSessionStore` (plain, and fenced by each session's lease as a host's agent
 * appends) against a raw batched insert with the same driver (`pg`) and the same durability
 * (`synchronous_commit = on`), and against that insert behind a `FOR UPDATE` of its sessions' rows
 * (the floor of one writer per session), alternated in one run (medians of 5 rounds); then the latency from a commit
 * on store instance A to the commit notice on instance B (LISTEN/NOTIFY, loopback). Bounded in
 * count; each phase runs in a schema of its own, dropped at the end.
 * Usage: node --import tsx bench/pg-append.bench.ts [postgres-url]
 */
import { cpus, loadavg } from "node:os";
import { PostgresSessionStore } from "../src/store/postgres/postgres-store.js";
import {
  bounded,
  DEFAULT_PG_URL,
  dropSchema,
  median,
  newSchema,
  pgAppendRounds,
} from "./scenarios/pg-append.js";

const URL = process.argv[2] ?? DEFAULT_PG_URL;
const SHAPE = { writers: 100, appendsPerWriter: 30 };
const ROUNDS = 5;
const LATENCY_SAMPLES = 300;

const deltaData = (i: number) => ({ turnId: "t", text: `token ${i} of a streamed answer` });
const percentile = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))]!;

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
      // B may hear of the session first when A already appended: then its first events come as
      // the `create` notice
      if (notice.kind !== "append" && notice.kind !== "create") return;
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
    await dropSchema(URL, schema);
  }
}

console.log(`# PostgreSQL store benchmark: ${cpus().length} cores, load ${loadavg()[0]!.toFixed(2)}, ${URL}`);
const rounds = await pgAppendRounds(URL, SHAPE, ROUNDS);
const ratio = median(rounds.store) / median(rounds.raw);
console.log(
  `append, ${SHAPE.writers} writers x ${SHAPE.appendsPerWriter}: store ${median(rounds.store).toFixed(0)}/s ` +
    `(${rounds.transactions} transactions), raw batched insert ${median(rounds.raw).toFixed(0)}/s, ` +
    `ratio ${ratio.toFixed(2)}x (goal >= 0.8x; medians of ${ROUNDS} alternating rounds)`,
);
console.log(
  `append with fences (each append carries its lease, as agents on several hosts write): ` +
    `${median(rounds.fenced).toFixed(0)}/s, ratio ${(median(rounds.fenced) / median(rounds.raw)).toFixed(2)}x`,
);
console.log(
  `raw batched insert behind a FOR UPDATE of its 100 sessions' rows (one writer per session, as ` +
    `every store write keeps it): ${median(rounds.locked).toFixed(0)}/s, ` +
    `${(median(rounds.locked) / median(rounds.raw)).toFixed(2)}x the raw insert; ` +
    `the store is ${(median(rounds.store) / median(rounds.locked)).toFixed(2)}x that floor`,
);
const latency = await bounded("notice latency", remoteNoticeLatency());
console.log(
  `commit on A -> notice on B (LISTEN/NOTIFY, loopback), ${LATENCY_SAMPLES} samples: ` +
    `p50 ${latency.p50.toFixed(2)} ms, p99 ${latency.p99.toFixed(2)} ms, max ${latency.max.toFixed(2)} ms`,
);
