import { once } from "node:events";
import { afterEach, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { ADMIN_TOKEN, startTestHost, type TestHost } from "../support/host.js";
import { until } from "../support/until.js";
import { scaled } from "./torture-scale.js";

// Small enough to keep the test short, large enough that 1,000 healthy peers in this one process keep up.
const PING_MS = 1_000;

let host: TestHost | undefined;
const sockets: WebSocket[] = [];
afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.terminate();
  await host?.dispose();
});

async function openConnections(): Promise<number> {
  const gauge = await host!.metrics.connections.get();
  return gauge.values[0]?.value ?? 0;
}

describe("torture: half-open sockets", () => {
  it("terminates every peer that stops reading and never answers pings", async () => {
    const count = scaled(1_000);
    host = await startTestHost({ mux: { pingIntervalMs: PING_MS } });
    for (let opened = 0; opened < count; opened += 100) {
      const batch = Array.from({ length: Math.min(100, count - opened) }, () => {
        const ws = new WebSocket(host!.wsUrl, ["sessionmux.v1"], {
          headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
        });
        ws.on("error", () => {});
        sockets.push(ws);
        return once(ws, "open");
      });
      await Promise.all(batch);
    }
    // Healthy peers answer pings: all of them stay while the rest connect.
    expect(await openConnections()).toBe(count);
    // Half-open from here on: the peers neither read nor answer pings, and never close.
    for (const ws of sockets) ws.pause();
    const started = performance.now();
    // Generous bound for a loaded machine; the figure that matters is printed below.
    await until(async () => (await openConnections()) === 0, 60_000, "host drops every half-open socket");
    const intervals = (performance.now() - started) / PING_MS;
    process.stdout.write(
      `torture half-open: sockets=${count} remaining=0 dropped after ${intervals.toFixed(1)} ping intervals\n`,
    );
    expect(await openConnections()).toBe(0);
  });
});
