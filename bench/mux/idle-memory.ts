import { heldBytes } from "../../test/support/held-bytes.js";
import type { Clients } from "./clients-process.js";
import { fmt, freshDb, goal, startBenchHost, TOKEN } from "./fixture.js";

/** memory: per idle connection (goal ≤ 64 KiB). */
const IDLE_SOCKETS = 500;

async function perIdleConnection(clients: Clients): Promise<number> {
  const host = await startBenchHost(freshDb());
  try {
    // One connection first so lazily created shared state is not charged to the idle ones.
    clients.send({ op: "idle", url: host.wsUrl, token: TOKEN, sockets: 1 });
    await clients.reply("ready");
    const before = heldBytes();
    clients.send({ op: "idle", url: host.wsUrl, token: TOKEN, sockets: IDLE_SOCKETS });
    await clients.reply("ready");
    await new Promise((r) => setTimeout(r, 200));
    const after = heldBytes();
    clients.send({ op: "drop" });
    await clients.reply("dropped");
    return (after - before) / IDLE_SOCKETS;
  } finally {
    await host.close();
  }
}

/** Runs the scenario and returns its report line. */
export async function idleMemoryScenario(clients: Clients): Promise<string[]> {
  const perIdle = await perIdleConnection(clients);
  return [
    `memory per idle connection: ${fmt(perIdle / 1024, 1)} KiB over ${IDLE_SOCKETS} sockets (goal ≤ 64 KiB — ${goal(perIdle <= 64 * 1024)})`,
  ];
}
