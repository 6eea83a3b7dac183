import { once } from "node:events";
import { mkdtempSync, rmSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { WebSocketServer } from "ws";
import type { NewEvent } from "../../protocol/index.js";
import { type RunningHost, startHost } from "../../src/server.js";
import type { Clients } from "./clients-process.js";

/** What every mux benchmark scenario shares: the host it starts, the events it appends, the figures it prints. */
export const TOKEN = "bench-token";
export const FOLLOWERS = 100;
export const PHASE_TIMEOUT_MS = 60_000;

// Made on first use: the clients' child process imports this module too and needs no folder.
let root: string | undefined;
let dbCounter = 0;
export function freshDb(): string {
  root ??= mkdtempSync(join(tmpdir(), "sessionmux-mux-bench-"));
  return join(root, `db-${dbCounter++}.sqlite`);
}
export function removeDbs(): void {
  if (root !== undefined) rmSync(root, { recursive: true, force: true });
}

export function startBenchHost(dbPath: string): Promise<RunningHost> {
  return startHost({
    port: 0,
    host: "127.0.0.1",
    dbPath,
    tokens: [{ name: "admin", secret: TOKEN, admin: true }],
  });
}

export const deltas = (n: number, text: (i: number) => string): NewEvent[] =>
  Array.from({ length: n }, (_, i) => ({
    type: "assistant/delta",
    data: { turnId: "bench", text: text(i) },
  }));

/** Creates the session; returns its head seq. */
export async function newSession(host: RunningHost, sessionId: string): Promise<number> {
  const created = await host.store.create({ sessionId, owner: "admin", model: "demo" });
  if (created.status !== "created") throw new Error(created.status);
  return created.events.length;
}

/**
 * A fresh host with one session that `FOLLOWERS` client sockets follow from its head, waiting
 * for `events` more; returns once every follower is ready.
 */
export async function followedHost(
  clients: Clients,
  sessionId: string,
  events: number,
  options: { latency?: boolean } = {},
): Promise<RunningHost> {
  const host = await startBenchHost(freshDb());
  try {
    const head = await newSession(host, sessionId);
    clients.send({
      op: "follow",
      url: host.wsUrl,
      token: TOKEN,
      sessionId,
      sockets: FOLLOWERS,
      afterSeq: head,
      until: head + events,
      ...(options.latency ? { latency: true } : {}),
    });
    await clients.reply("ready");
    return host;
  } catch (err) {
    await host.close();
    throw err;
  }
}

/** A bare `ws` server on a free loopback port: the baseline every scenario compares against. */
export async function rawWsServer(): Promise<{
  server: WebSocketServer;
  url: string;
  close(): Promise<void>;
}> {
  const server = new WebSocketServer({ host: "127.0.0.1", port: 0, perMessageDeflate: false });
  await once(server, "listening");
  return {
    server,
    url: `ws://127.0.0.1:${(server.address() as AddressInfo).port}`,
    async close() {
      for (const socket of server.clients) socket.terminate();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

export function cpuMs(since: NodeJS.CpuUsage): number {
  const d = process.cpuUsage(since);
  return (d.user + d.system) / 1000;
}

export const fmt = (n: number, digits = 0) =>
  n.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });

export const goal = (ok: boolean) => (ok ? "met" : "MISSED");
