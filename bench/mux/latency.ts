import { encodeFrame } from "../../protocol/codec.js";
import { percentile, wallNow } from "../harness/stats.js";
import type { Clients } from "./clients-process.js";
import { deltas, FOLLOWERS, fmt, followedHost, goal, rawWsServer } from "./fixture.js";

/** latency: append→delivery with 100 followers at 1,000 events/s (goal p50 ≤ 2 ms, p99 ≤ 10 ms). */
const LATENCY_RATE = 1_000;
const LATENCY_SECONDS = 5;
const TOTAL = LATENCY_RATE * LATENCY_SECONDS;

/** Calls `produce` once per event at LATENCY_RATE, with the wall-clock time it was produced at. */
async function paced(produce: (index: number, at: number) => void): Promise<void> {
  const t0 = performance.now();
  for (let sent = 0; sent < TOTAL; ) {
    const due = Math.min(TOTAL, Math.floor(((performance.now() - t0) * LATENCY_RATE) / 1000) + 1);
    for (; sent < due; sent++) produce(sent, wallNow());
    await new Promise((r) => setTimeout(r, 1));
  }
}

async function latencySessionmux(
  clients: Clients,
): Promise<{ p50: number; p99: number; commitP50: number; commitP99: number; samples: number }> {
  const host = await followedHost(clients, "latency", TOTAL, { latency: true });
  try {
    const commit: number[] = [];
    const pending: Promise<unknown>[] = [];
    await paced((_index, at) => {
      pending.push(
        host.store
          .append(
            "latency",
            deltas(1, () => String(at)),
          )
          .then(() => commit.push(wallNow() - at)),
      );
    });
    await Promise.all(pending);
    const reply = await clients.reply("done");
    const latencies = reply.latencies as number[];
    return {
      p50: percentile(latencies, 50),
      p99: percentile(latencies, 99),
      commitP50: percentile(commit, 50),
      commitP99: percentile(commit, 99),
      samples: latencies.length,
    };
  } finally {
    await host.close();
  }
}

/** The floor of the same measurement: a bare `ws` server sending each event as it is produced. */
async function latencyRawWs(clients: Clients): Promise<{ p50: number; p99: number }> {
  const raw = await rawWsServer();
  try {
    clients.send({ op: "raw", url: raw.url, sockets: FOLLOWERS, until: TOTAL, latency: true });
    await clients.reply("ready");
    await paced((index, at) => {
      const events = [
        {
          seq: index + 1,
          at: Date.now(),
          type: "assistant/delta",
          data: { turnId: "bench", text: String(at) },
        },
      ];
      const frame = encodeFrame({ type: "item", id: 1, value: { kind: "events", events } });
      for (const socket of raw.server.clients) socket.send(frame);
    });
    const reply = await clients.reply("done");
    const latencies = reply.latencies as number[];
    return { p50: percentile(latencies, 50), p99: percentile(latencies, 99) };
  } finally {
    await raw.close();
  }
}

/** Runs the scenario and returns its report lines. */
export async function latencyScenario(clients: Clients): Promise<string[]> {
  const lat = await latencySessionmux(clients);
  const rawLat = await latencyRawWs(clients);
  return [
    `append→delivery, ${FOLLOWERS} followers at ${fmt(LATENCY_RATE)} events/s for ${LATENCY_SECONDS} s (${fmt(lat.samples)} deliveries):`,
    `  sessionmux p50 ${fmt(lat.p50, 2)} ms, p99 ${fmt(lat.p99, 2)} ms (goal p50 ≤ 2, p99 ≤ 10 — ${goal(lat.p50 <= 2 && lat.p99 <= 10)})`,
    `  of which the durable commit (append call → promise resolved): p50 ${fmt(lat.commitP50, 2)} ms, p99 ${fmt(lat.commitP99, 2)} ms`,
    `  raw ws sending each event as produced (no store), same clients: p50 ${fmt(rawLat.p50, 2)} ms, p99 ${fmt(rawLat.p99, 2)} ms`,
  ];
}
