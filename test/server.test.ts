import { once } from "node:events";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import pg from "pg";
import { describe, expect, inject, it } from "vitest";
import WebSocket from "ws";
import { SUBPROTOCOL } from "../protocol/index.js";
import { StartupError } from "../src/operations/startup-error.js";
import { type HostOptions, type RunningHost, startHost } from "../src/server.js";
import type { PostgresSessionStore } from "../src/store/postgres/postgres-store.js";
import { scratchDatabase } from "./store/postgres/scratch-database.js";
import { cleanupsAfterEach } from "./support/cleanups.js";
import { capturedLogger } from "./support/log-capture.js";
import { tempDir } from "./support/temp-dir.js";

/**
 * `startHost`: a host on a server of its own. Where it listens and what it says it listens on,
 * the options it hands the host, a port in use, and closing.
 */

const pgUrl = inject("pgUrl") ?? "";
const cleanups = cleanupsAfterEach();
const ADMIN_TOKEN = "server-admin-token";
const tokens = [{ name: "admin", secret: ADMIN_TOKEN, admin: true }];

async function started(options: Partial<HostOptions> = {}): Promise<RunningHost> {
  const dir = tempDir();
  cleanups.push(() => dir.remove());
  const running = await startHost({ dbPath: dir.file("sessions.db"), port: 0, tokens, ...options });
  cleanups.push(() => running.close());
  return running;
}

async function metricsOf(running: RunningHost, token: string, origin?: string): Promise<Response> {
  return fetch(`${running.url}/metrics`, {
    headers: { authorization: `Bearer ${token}`, ...(origin ? { origin } : {}) },
  });
}

describe("a host on a server of its own", () => {
  it("listens on 127.0.0.1 by default and answers at the url and wsUrl it names, with the host id it is given", async () => {
    const running = await started({ hostId: "host-a" });
    expect(running.port).toBeGreaterThan(0);
    expect(running.url).toBe(`http://127.0.0.1:${running.port}`);
    expect(running.wsUrl).toBe(`ws://127.0.0.1:${running.port}/api/remote.mux`);
    expect(running.hostId).toBe("host-a");
    expect(running.server.address()).toMatchObject({ address: "127.0.0.1", port: running.port });
    expect((await metricsOf(running, ADMIN_TOKEN)).status).toBe(200);
    const ws = new WebSocket(running.wsUrl, [SUBPROTOCOL], {
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
    });
    cleanups.push(() => ws.terminate());
    await once(ws, "open");
    expect(ws.protocol).toBe(SUBPROTOCOL);
  });

  it("reports no process metrics unless asked to, and reads /metrics with its metrics token", async () => {
    const plain = await started({ metricsToken: "metrics-only" });
    const text = await (await metricsOf(plain, "metrics-only")).text();
    expect(text).toContain("sessionmux_");
    expect(text).not.toContain("process_cpu_user_seconds_total");
    const withProcess = await started({ processMetrics: true });
    expect(await (await metricsOf(withProcess, ADMIN_TOKEN)).text()).toContain(
      "process_cpu_user_seconds_total",
    );
  });

  it("takes a request from an Origin it is told to allow, and refuses it otherwise", async () => {
    const origin = "https://app.example";
    expect((await metricsOf(await started(), ADMIN_TOKEN, origin)).status).toBe(403);
    expect((await metricsOf(await started({ allowedOrigins: [origin] }), ADMIN_TOKEN, origin)).status).toBe(
      200,
    );
  });

  it("names an IPv6 address in brackets in its url and wsUrl", async () => {
    const running = await started({ host: "::1" });
    expect(running.url).toBe(`http://[::1]:${running.port}`);
    expect(running.wsUrl).toBe(`ws://[::1]:${running.port}/api/remote.mux`);
    expect(running.server.address()).toMatchObject({ address: "::1", port: running.port });
    expect((await metricsOf(running, ADMIN_TOKEN)).status).toBe(200);
  });

  it("listens on the port it is given", async () => {
    const probe = createServer();
    probe.listen(0, "127.0.0.1");
    await once(probe, "listening");
    const { port } = probe.address() as AddressInfo;
    await new Promise((resolve) => probe.close(resolve));
    const running = await started({ port });
    expect(running.port).toBe(port);
    expect(running.url).toBe(`http://127.0.0.1:${port}`);
  });

  it("answers every path as its own: the console at /", async () => {
    const running = await started();
    const page = await fetch(`${running.url}/`);
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toContain("text/html");
  });

  it("without origins, answers no CORS preflight", async () => {
    const running = await started();
    const r = await fetch(`${running.url}/api/chat/sessions`, {
      method: "OPTIONS",
      headers: { origin: "https://app.example", "access-control-request-method": "GET" },
    });
    expect(r.status).not.toBe(204);
    expect(r.headers.get("access-control-allow-origin")).toBeNull();
    expect(r.headers.get("access-control-allow-methods")).toBeNull();
  });

  it("applies the HTTP server limits it is given", async () => {
    const running = await started({ httpServer: { headersTimeoutMs: 7_000, keepAliveTimeoutMs: 3_000 } });
    expect(running.server.headersTimeout).toBe(7_000);
    expect(running.server.keepAliveTimeout).toBe(3_000);
  });

  it("refuses a missing database folder unless told to create it", async () => {
    const dir = tempDir();
    cleanups.push(() => dir.remove());
    await expect(
      startHost({ dbPath: dir.file("missing/sessions.db"), port: 0, tokens }),
    ).rejects.toMatchObject({
      code: "db_folder_missing",
    });
    const running = await startHost({
      dbPath: dir.file("missing/sessions.db"),
      port: 0,
      tokens,
      createDbFolder: true,
    });
    cleanups.push(() => running.close());
    expect((await metricsOf(running, ADMIN_TOKEN)).status).toBe(200);
  });

  it("refuses a port in use with address_in_use naming it, and closes its database again", async () => {
    const first = await started();
    const dir = tempDir();
    cleanups.push(() => dir.remove());
    const dbPath = dir.file("sessions.db");
    const refused = await startHost({ dbPath, port: first.port, host: "127.0.0.1", tokens }).catch(
      (e: unknown) => e,
    );
    expect(refused).toBeInstanceOf(StartupError);
    expect(refused).toMatchObject({
      code: "address_in_use",
      message: `port ${first.port} on 127.0.0.1 is already in use; stop the other process or pick another --port`,
    });
    expect((refused as Error).cause).toMatchObject({ code: "EADDRINUSE" });
    // the database was let go of: another host opens it
    const again = await startHost({ dbPath, port: 0, tokens });
    cleanups.push(() => again.close());
    expect((await metricsOf(again, ADMIN_TOKEN)).status).toBe(200);
  });

  it("closes once however often asked, and gives its port back", async () => {
    const running = await started();
    const first = running.close();
    expect(running.close()).toBe(first);
    await first;
    expect(running.server.listening).toBe(false);
    const other = createServer();
    other.listen(running.port, "127.0.0.1");
    await once(other, "listening");
    await new Promise((resolve) => other.close(resolve));
  });
});

describe("a host that cannot listen", () => {
  it("refuses an address not on this machine with listen_failed naming it, and closes its database again", async () => {
    const dir = tempDir();
    cleanups.push(() => dir.remove());
    const dbPath = dir.file("sessions.db");
    // 192.0.2.1 (TEST-NET-1) is no address of this machine: binding it fails at once, nothing is sent
    const refused = await startHost({ dbPath, port: 0, host: "192.0.2.1", tokens }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(StartupError);
    expect(refused).toMatchObject({
      code: "listen_failed",
      message: "cannot listen on 192.0.2.1:0 (EADDRNOTAVAIL); check --host and --port",
    });
    expect((refused as Error).cause).toMatchObject({ code: "EADDRNOTAVAIL" });
    const again = await startHost({ dbPath, port: 0, tokens });
    cleanups.push(() => again.close());
    expect((await metricsOf(again, ADMIN_TOKEN)).status).toBe(200);
  });

  it("throws any other listen error as it is, and closes its database again", async () => {
    const dir = tempDir();
    cleanups.push(() => dir.remove());
    const dbPath = dir.file("sessions.db");
    // a link-local address without an interface: binding fails at once with EINVAL, nothing is sent
    const refused = await startHost({ dbPath, port: 0, host: "fe80::1", tokens }).catch((e: unknown) => e);
    expect(refused).not.toBeInstanceOf(StartupError);
    expect(refused).toMatchObject({ code: "EINVAL", syscall: "listen" });
    const again = await startHost({ dbPath, port: 0, tokens });
    cleanups.push(() => again.close());
    expect((await metricsOf(again, ADMIN_TOKEN)).status).toBe(200);
  });
});

describe("the options a host on a server of its own hands on", () => {
  it("writes to the logger it is given", async () => {
    const { logger, lines } = capturedLogger();
    const running = await started({ logger });
    const refused = await fetch(`${running.url}/api/chat/sessions`, {
      headers: { authorization: "Bearer not-a-token" },
    });
    expect(refused.status).toBe(401);
    await new Promise((resolve) => setImmediate(resolve));
    expect(lines.filter((line) => line.msg === "request refused")).toHaveLength(1);
  });

  it("applies the HTTP options it is given: a body over maxBodyBytes is refused with 413", async () => {
    const answer = (running: RunningHost) =>
      fetch(`${running.url}/v1/interactions/i-1/answer`, {
        method: "POST",
        headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" },
        body: JSON.stringify({ response: "x".repeat(64) }),
      });
    const strict = await started({ http: { maxBodyBytes: 16 } });
    const refused = await answer(strict);
    expect(refused.status).toBe(413);
    expect(await refused.json()).toMatchObject({ error: "payload_too_large" });
    // the same body under the default limit is read (and then found wanting for other reasons)
    expect((await answer(await started())).status).not.toBe(413);
  });

  it("applies the connection options it is given: a frame over maxPayloadBytes closes the socket with 1009", async () => {
    /** The close code a 4096-byte frame brings, or "pong" when a ping sent after it is answered first. */
    const afterBigFrame = async (running: RunningHost): Promise<number | "pong"> => {
      const ws = new WebSocket(running.wsUrl, [SUBPROTOCOL], {
        headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
      });
      cleanups.push(() => ws.terminate());
      await once(ws, "open");
      ws.send(Buffer.alloc(4096));
      ws.ping();
      return Promise.race([
        once(ws, "pong").then(() => "pong" as const),
        once(ws, "close").then(([code]) => code as number),
      ]);
    };
    expect(await afterBigFrame(await started({ mux: { maxPayloadBytes: 1024 } }))).toBe(1009);
    // under the default limit the frame is read (whatever the host makes of it)
    expect(await afterBigFrame(await started())).not.toBe(1009);
  });
});

describe.skipIf(!pgUrl)("a host on PostgreSQL", () => {
  it("hands on its schema, pool size and lease time", async () => {
    // a database of its own: were the schema not handed on, nothing would be left in a shared one
    const scratch = await scratchDatabase(pgUrl, "start_host");
    cleanups.push(() => scratch.drop());
    const running = await startHost({
      dbPath: scratch.url,
      dbSchema: "hosts_a",
      dbPoolSize: 1,
      leaseTtlMs: 60_000,
      port: 0,
      tokens,
    });
    cleanups.push(() => running.close());
    expect(running.host.leases?.ttlMs).toBe(60_000);

    expect((await running.store.create({ sessionId: "s-1", owner: "admin", model: "m" })).status).toBe(
      "created",
    );
    const client = new pg.Client({ connectionString: scratch.url });
    await client.connect();
    try {
      const { rows } = await client.query<{ schema: string }>(
        "SELECT DISTINCT table_schema AS schema FROM information_schema.tables WHERE table_name = 'sessions'",
      );
      expect(rows).toEqual([{ schema: "hosts_a" }]);
    } finally {
      await client.end();
    }

    // six reads at once share the one connection of the read pool
    const store = running.store as unknown as PostgresSessionStore;
    await Promise.all(Array.from({ length: 6 }, () => store.search("hello", 5)));
    expect(store.poolStats().reads.total).toBe(1);
  }, 30_000); // creating a database takes a while on a busy server
});
