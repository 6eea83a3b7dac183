import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import WebSocket from "ws";
import type { ConnectionState } from "../../src/client/connection-state.js";
import { createClient } from "../../src/client/index.js";
import { nodeSocketFactory } from "../../src/client/node.js";
import {
  browserSocketFactory,
  type SocketFactory,
  type WebSocketConstructor,
} from "../../src/client/socket.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { tempDir } from "../support/temp-dir.js";
import { type ChildHost, freePort, startChildHost } from "./child-host.js";

/**
 * The client's own event loop held right after each keepalive probe, as a busy tab or a long
 * synchronous task holds it: the host (another process, so not held with it) answers meanwhile,
 * and once the loop runs again the probe's deadline has long passed. The answer is there, only
 * not read yet: the socket is alive and must be kept.
 */
const cleanups = cleanupsAfterEach();
const dir = tempDir();
let host: ChildHost;

beforeAll(async () => {
  host = await startChildHost({ port: await freePort(), dbPath: dir.file("sessions.db"), token: "t" });
}, 30_000);
afterAll(async () => {
  await host.kill();
  dir.remove();
});

/** Holds the event loop for `ms` from its check phase: the next turn begins with the timers due meanwhile. */
function holdLoop(ms: number): void {
  setImmediate(() => {
    const until = Date.now() + ms;
    while (Date.now() < until) {
      // held
    }
  });
}

/** `inner`'s sockets, the loop held after each probe they send (a ping, or a close probe) once armed. */
function holdingAfterProbes(inner: SocketFactory) {
  const state = { armed: false, holds: 0 };
  const hold = () => {
    if (!state.armed) return;
    state.holds += 1;
    holdLoop(400);
  };
  const factory: SocketFactory = (url, token) => {
    const socket = inner(url, token);
    const ping = socket.keepAlivePing?.bind(socket);
    const send = socket.send.bind(socket);
    if (ping) {
      socket.keepAlivePing = () => {
        ping();
        hold();
      };
    } else {
      // once armed, the client sends nothing but its close probes
      socket.send = (data) => {
        send(data);
        hold();
      };
    }
    return socket;
  };
  return { state, factory };
}

describe.each([
  ["Node (WebSocket ping frames)", nodeSocketFactory],
  ["browser-style (close probe)", browserSocketFactory(WebSocket as unknown as WebSocketConstructor)],
])("client keepalive past a stall of its own, %s", (_kind, inner) => {
  it("keeps the socket whose answer came in while the client's loop was held past the probe's deadline", async () => {
    const { state, factory } = holdingAfterProbes(inner);
    const client = createClient({
      url: host.url,
      token: "t",
      socketFactory: factory,
      // each hold (400 ms) outlasts the probe's wait many times over
      keepAlive: { intervalMs: 100, pongTimeoutMs: 50 },
    });
    cleanups.push(() => client.close());
    const states: ConnectionState["name"][] = [];
    const sub = client.state$.subscribe((s) => states.push(s.name));
    cleanups.push(() => sub.unsubscribe());
    await client.call("session.models", {});
    state.armed = true;
    await vi.waitFor(() => expect(state.holds).toBeGreaterThanOrEqual(4), { timeout: 20_000 });
    state.armed = false;
    expect(states).toEqual(["connecting", "open"]);
    await client.call("session.models", {});
  });
});
