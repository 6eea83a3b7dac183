/**
 * Mux benchmark (`npm run bench:mux`): the host in this process, the clients in a child process
 * (so `process.cpuUsage()` here is the server's CPU), every figure next to its baseline measured in
 * the same run. Every phase is bounded in count and time. One scenario per module in `bench/mux/`:
 *
 *   fanout   100k events of one session → 100 followers, against raw `ws` sending the same
 *            pre-encoded frames (goal ≥ 0.5× deliveries per server CPU-second)
 *   replay   cold replay of a 100k-event session, against a raw SQLite page read + ws send
 *            (goal ≥ 0.7× events/s)
 *   latency  append→delivery with 100 followers at 1,000 events/s (goal p50 ≤ 2 ms, p99 ≤ 10 ms)
 *   memory   per idle connection (goal ≤ 64 KiB)
 */

import { Clients } from "./mux/clients-process.js";
import { fanoutScenario } from "./mux/fanout.js";
import { fmt, removeDbs } from "./mux/fixture.js";
import { idleMemoryScenario } from "./mux/idle-memory.js";
import { latencyScenario } from "./mux/latency.js";
import { replayScenario } from "./mux/replay.js";
import { runClients } from "./mux-bench-clients.js";

async function main(): Promise<void> {
  const clients = new Clients();
  const started = performance.now();
  try {
    // Profiling aid: `MUX_BENCH_ONLY=fanout node --cpu-prof --import tsx bench/mux.bench.ts`.
    if (process.env.MUX_BENCH_ONLY === "fanout") {
      console.log((await fanoutScenario(clients, true)).join("\n"));
      return;
    }
    for (const scenario of [fanoutScenario, replayScenario, latencyScenario, idleMemoryScenario]) {
      console.log((await scenario(clients)).join("\n"));
    }
    console.log(`total ${fmt((performance.now() - started) / 1000, 1)} s`);
  } finally {
    clients.kill();
    removeDbs();
  }
}

if (process.argv.includes("--clients")) {
  runClients();
} else {
  await main();
}
