import { describe, expect, it, vi } from "vitest";
import WebSocket from "ws";
import type { ConnectionState } from "../../src/client/connection-state.js";
import type { FollowUpdate } from "../../src/client/follow-cursor.js";
import { followSession } from "../../src/client/follow-session.js";
import { type ClientOptions, createClient, type SessionmuxClient } from "../../src/client/index.js";
import type { NetworkSignal } from "../../src/client/network-signals.js";
import { createNodeClient } from "../../src/client/node.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { ADMIN_TOKEN, startTestHost } from "../support/host.js";
import { startTcpProxy } from "../support/tcp-proxy.js";
import { startFakePeer } from "./fake-peer.js";

const cleanups = cleanupsAfterEach();
const keepAlive = { intervalMs: 100, pongTimeoutMs: 1_000 };
const backoff = { baseMs: 5, capMs: 20 };

type Make = (options: Omit<ClientOptions, "WebSocket">) => SessionmuxClient;
const kinds: [string, Make][] = [
  ["Node (WebSocket ping frames)", (o) => createNodeClient(o)],
  ["browser-style (close probe)", (o) => createClient({ ...o, WebSocket })],
];

describe.each(kinds)("client keepalive, %s", (_kind, make) => {
  it("drops a socket whose path went silent and resumes the follow on a new one", async () => {
    const host = await startTestHost();
    cleanups.push(() => host.dispose());
    const proxy = await startTcpProxy(host.port);
    cleanups.push(() => proxy.stop());
    const admin = createNodeClient({ url: host.wsUrl, token: ADMIN_TOKEN });
    cleanups.push(() => admin.close());
    await admin.create({ sessionId: "ka" });

    const client = make({
      url: `ws://127.0.0.1:${proxy.port}/api/remote.mux`,
      token: ADMIN_TOKEN,
      keepAlive,
      backoff,
    });
    cleanups.push(() => client.close());
    const states: ConnectionState[] = [];
    const stateSub = client.state$.subscribe((s) => states.push(s));
    cleanups.push(() => stateSub.unsubscribe());
    const updates: FollowUpdate[] = [];
    const sub = followSession(client, "ka").subscribe((u) => updates.push(u));
    cleanups.push(() => sub.unsubscribe());
    await vi.waitFor(() => expect(updates.some((u) => u.kind === "caughtUp")).toBe(true));

    expect(proxy.silenceAll()).toBe(1);
    await vi.waitFor(() => expect(proxy.accepted).toBeGreaterThanOrEqual(2), { timeout: 15_000 });
    await vi.waitFor(() => expect(client.state.name).toBe("open"));
    expect(states.some((s) => s.name === "backoff")).toBe(true);
    // the dead path's socket is torn down at once, not left closing until a handshake times out (30 s)
    await vi.waitFor(() => expect(proxy.open).toBe(1), { timeout: 5_000 });
    const { seq } = await admin.call("session.rename", { sessionId: "ka", title: "after silence" });
    await vi.waitFor(() =>
      expect(updates.some((u) => u.kind === "events" && u.events.some((e) => e.seq === seq))).toBe(true),
    );
  });
});

describe.each(kinds)("client on a network hint, %s", (_kind, make) => {
  it("an `offline` hint probes at once: a dead path is dropped within the probe's wait, not after the quiet one", async () => {
    const host = await startTestHost();
    cleanups.push(() => host.dispose());
    const proxy = await startTcpProxy(host.port);
    cleanups.push(() => proxy.stop());
    let say: ((signal: NetworkSignal) => void) | undefined;
    const client = make({
      url: `ws://127.0.0.1:${proxy.port}/api/remote.mux`,
      token: ADMIN_TOKEN,
      // the quiet wait alone would notice the dead path only after ten minutes
      keepAlive: { intervalMs: 600_000, pongTimeoutMs: 500 },
      backoff,
      network: (listener) => {
        say = listener;
        return () => (say = undefined);
      },
    });
    cleanups.push(() => client.close());
    await client.call("session.models", {});
    expect(proxy.silenceAll()).toBe(1);
    say?.("offline");
    await vi.waitFor(() => expect(proxy.accepted).toBeGreaterThanOrEqual(2), { timeout: 5_000 });
    await vi.waitFor(() => expect(client.state.name).toBe("open"));
    await client.call("session.models", {});
  });
});

describe("client keepalive on a healthy quiet socket", () => {
  it("probes with pings (Node) and close probes (browser) and keeps the socket", async () => {
    const p = await startFakePeer();
    cleanups.push(() => p.stop());
    const quick = { intervalMs: 30, pongTimeoutMs: 2_000 };
    const node = createNodeClient({ url: p.url, token: "t", keepAlive: quick });
    const browser = createClient({ url: p.url, token: "t", WebSocket, keepAlive: quick });
    cleanups.push(
      () => node.close(),
      () => browser.close(),
    );
    await vi.waitFor(() => expect(p.connections).toHaveLength(2));
    const pings = [0, 0];
    for (const [i, conn] of p.connections.entries()) conn.socket.on("ping", () => (pings[i]! += 1));
    const probes = () => p.connections.map((c) => c.received.filter((f) => f.type === "close").length);
    await vi.waitFor(
      () => {
        // each client probes at least 5 times, whichever connection is whose
        expect(Math.max(pings[0]!, probes()[0]!)).toBeGreaterThanOrEqual(5);
        expect(Math.max(pings[1]!, probes()[1]!)).toBeGreaterThanOrEqual(5);
      },
      { timeout: 10_000 },
    );
    // the Node client pings (the host answers at the WebSocket layer) and sends no close probe;
    // the browser-style one, which cannot ping, sends only close probes
    const byKind = p.connections.map((_, i) => ({ pings: pings[i]!, closes: probes()[i]! }));
    expect(byKind.filter((c) => c.pings >= 5 && c.closes === 0)).toHaveLength(1);
    expect(byKind.filter((c) => c.closes >= 5 && c.pings === 0)).toHaveLength(1);
    expect(p.connections).toHaveLength(2);
    expect(node.state.name).toBe("open");
    expect(browser.state.name).toBe("open");
  });
});
