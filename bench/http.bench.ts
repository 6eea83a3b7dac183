/**
 * HTTP read routes against a bare `node:http` handler that returns the same bytes, in one run:
 * `GET /v1/sessions/{id}` for a 2,000-message session and `GET /api/chat/sessions`.
 * Bounded: per route 4 autocannon runs of BENCH_SECONDS/2 (default 8 s in all per side), ABBA order. `npm run bench:http`.
 */
import { once } from "node:events";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { performance } from "node:perf_hooks";
import autocannon from "autocannon";
import type { NewEvent } from "../protocol/index.js";
import { applyEvents, emptyTranscript } from "../protocol/transcript.js";
import { startHost } from "../src/server.js";
import { tempDir } from "../test/support/temp-dir.js";
import { readWholeLog } from "../test/support/whole-log.js";

const SECONDS = Number(process.env.BENCH_SECONDS ?? 8);
const CONNECTIONS = 10;
const TOKEN = "bench-token";
const MESSAGES = 2000;
const LIST_SESSIONS = 200;

const dir = tempDir("sessionmux-bench-");
const running = await startHost({
  port: 0,
  host: "127.0.0.1",
  dbPath: dir.file("bench.db"),
  tokens: [{ name: "admin", secret: TOKEN, admin: true }],
});
const store = running.store;

function turnEvents(i: number): NewEvent[] {
  const turnId = `t${i}`;
  return [
    { type: "turn/start", data: { turnId, trigger: "prompt" } },
    {
      type: "user/message",
      data: {
        messageId: `m${i}`,
        source: "user",
        text: `question number ${i}: what is the answer?`,
        attachments: [],
        meta: {},
      },
    },
    { type: "assistant/delta", data: { turnId, text: `The answer to question ${i} is ` } },
    { type: "assistant/delta", data: { turnId, text: "forty-two, as computed by the demo. ".repeat(3) } },
    { type: "tool/call", data: { turnId, toolCallId: `c${i}`, name: "lookup", args: { q: i } } },
    {
      type: "tool/result",
      data: { turnId, toolCallId: `c${i}`, ok: true, result: { hits: 3 }, durationMs: 4 },
    },
    { type: "assistant/delta", data: { turnId, text: "Done." } },
    { type: "turn/end", data: { turnId, state: "completed" } },
  ];
}

const big = "bench-big";
await store.create({ sessionId: big, owner: "admin", model: "demo", title: "2,000 messages" });
for (let i = 0; i < MESSAGES / 2; i += 50) {
  const batch: NewEvent[] = [];
  for (let k = i; k < i + 50; k++) batch.push(...turnEvents(k));
  const out = await store.append(big, batch);
  if (out.status !== "appended") throw new Error(`seed failed: ${out.status}`);
}
for (let i = 0; i < LIST_SESSIONS; i++) {
  await store.create({ sessionId: `bench-list-${i}`, owner: "admin", model: "demo" });
  await store.append(`bench-list-${i}`, turnEvents(0));
}

// The reducer alone, for the record: the whole 2,000-message log folded in one batch.
const all = await readWholeLog(store, big);
if (all.status !== "ok") throw new Error("read failed");
const reduceStart = performance.now();
const REDUCE_RUNS = 50;
for (let i = 0; i < REDUCE_RUNS; i++) applyEvents(emptyTranscript(), all.events);
const reduceMs = (performance.now() - reduceStart) / REDUCE_RUNS;

async function fetchOnce(path: string): Promise<{ body: Buffer; type: string }> {
  const r = await fetch(`${running.url}${path}`, { headers: { authorization: `Bearer ${TOKEN}` } });
  if (r.status !== 200) throw new Error(`${path}: ${r.status}`);
  return {
    body: Buffer.from(await r.arrayBuffer()),
    type: r.headers.get("content-type") ?? "application/json",
  };
}

async function bareServer(body: Buffer, type: string): Promise<Server> {
  const server = createServer((_req, res) => {
    res.writeHead(200, { "content-type": type, "content-length": body.length, "cache-control": "no-store" });
    res.end(body);
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return server;
}

interface Figures {
  rps: number;
  p50: number;
  p99: number;
  errors: number;
}

async function measure(url: string, seconds: number): Promise<Figures> {
  const r = await autocannon({
    url,
    connections: CONNECTIONS,
    duration: seconds,
    headers: { authorization: `Bearer ${TOKEN}` },
  });
  return { rps: r.requests.average, p50: r.latency.p50, p99: r.latency.p99, errors: r.errors + r.non2xx };
}

/** ABBA order (host, bare, bare, host) so load from other processes drifting over the run hits both alike. */
async function compare(host: string, bare: string): Promise<[Figures, Figures]> {
  const half = SECONDS / 2;
  const a1 = await measure(host, half);
  const b1 = await measure(bare, half);
  const b2 = await measure(bare, half);
  const a2 = await measure(host, half);
  const mean = (x: Figures, y: Figures): Figures => ({
    rps: (x.rps + y.rps) / 2,
    p50: (x.p50 + y.p50) / 2,
    p99: (x.p99 + y.p99) / 2,
    errors: x.errors + y.errors,
  });
  return [mean(a1, a2), mean(b1, b2)];
}

const rows: string[] = [];
for (const path of [`/v1/sessions/${big}`, "/api/chat/sessions?limit=50"]) {
  const { body, type } = await fetchOnce(path);
  const bare = await bareServer(body, type);
  const port = (bare.address() as AddressInfo).port;
  const [ours, base] = await compare(`${running.url}${path}`, `http://127.0.0.1:${port}${path}`);
  bare.close();
  rows.push(
    `${path.padEnd(34)} ${String(body.length).padStart(8)} B  host ${ours.rps.toFixed(0).padStart(6)} req/s ` +
      `p50 ${ours.p50} ms p99 ${ours.p99} ms (errors ${ours.errors})  |  bare ${base.rps.toFixed(0).padStart(6)} req/s ` +
      `p50 ${base.p50} ms p99 ${base.p99} ms  |  ratio ${(ours.rps / base.rps).toFixed(3)}×`,
  );
}

console.log(
  `\nHTTP read routes vs bare node:http (same bytes), ${CONNECTIONS} connections, ${SECONDS} s each`,
);
for (const row of rows) console.log(row);
console.log(
  `reducer: ${all.events.length} events (${MESSAGES} messages) folded in ${reduceMs.toFixed(2)} ms per replay`,
);

await running.close();
dir.remove();
