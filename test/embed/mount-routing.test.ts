import { once } from "node:events";
import { createServer, type Server } from "node:http";
import { connect } from "node:net";
import type { Duplex } from "node:stream";
import { setTimeout as sleep } from "node:timers/promises";
import { pino } from "pino";
import { describe, expect, it, vi } from "vitest";
import WebSocket, { WebSocketServer } from "ws";
import type { TurnContext } from "../../src/agents/agent.js";
import { mountSessionmux } from "../../src/embed/mount-sessionmux.js";
import { ADMIN } from "../../src/host/principal.js";
import { createSessionmux, type Sessionmux } from "../../src/index.js";
import { startHost } from "../../src/server.js";
import type { HostStore } from "../../src/store/live-state-store.js";
import { demoAgentWith } from "../host/host-fixture.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { capturedLogger } from "../support/log-capture.js";
import { tempDir } from "../support/temp-dir.js";
import { upgradeRequest } from "../support/upgrade-request.js";
import { appAuthenticate, listen, mountedApp, upgradeStatus } from "./app-fixture.js";

/**
 * What `createSessionmux` answers on a shared server besides the host's routes: the base path's
 * slash, paths nobody claims, an attached server without listeners of its own, detaching, CORS's
 * headers, `/readyz` from the periodic check, and the shutdown's record.
 */

const cleanups = cleanupsAfterEach();
const tokens = [{ name: "admin", secret: "s3cret", admin: true }];

async function sessionmux(
  options: Partial<Parameters<typeof createSessionmux>[0]> = {},
): Promise<Sessionmux> {
  const dir = tempDir();
  cleanups.push(() => dir.remove());
  // the app's own authenticate replaces the token list, which is refused beside it
  const mux = await createSessionmux({
    db: dir.file("sessions.db"),
    ...(options.authenticate ? {} : { tokens }),
    ...options,
  });
  cleanups.push(() => mux.close());
  return mux;
}

async function served(server: Server): Promise<string> {
  const authority = await listen(server);
  cleanups.push(() => {
    server.closeAllConnections();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return authority;
}

describe("createSessionmux on a shared server", () => {
  it("redirects GET and HEAD of the base path itself to it with a slash, query kept; no other method", async () => {
    const { authority } = await mountedApp(cleanups);
    for (const method of ["GET", "HEAD"]) {
      for (const [path, location] of [
        ["/chat", "/chat/"],
        ["/chat?token=1", "/chat/?token=1"],
      ]) {
        const r = await fetch(`http://${authority}${path}`, { method, redirect: "manual" });
        expect([method, path, r.status, r.headers.get("location")]).toEqual([method, path, 308, location]);
      }
    }
    const post = await fetch(`http://${authority}/chat`, { method: "POST", redirect: "manual" });
    expect([post.status, post.headers.get("location"), await post.json()]).toEqual([
      404,
      null,
      { error: "not_found" },
    ]);
  });

  it("used as a handler without next, answers 404 not_found to what is not its own", async () => {
    const mux = await sessionmux({ basePath: "/chat" });
    const authority = await served(createServer((req, res) => mux.handler(req, res)));
    const r = await fetch(`http://${authority}/elsewhere`);
    expect([r.status, r.headers.get("content-type"), await r.json()]).toEqual([
      404,
      "application/json",
      { error: "not_found" },
    ]);
    expect((await fetch(`http://${authority}/chat/healthz`)).status).toBe(200);
  });

  it("behind a body parser that read the body first, answers 500 and logs how to mount it", async () => {
    const { logger, lines } = capturedLogger();
    const mux = await sessionmux({ basePath: "/chat", logger });
    // what express.json() does in front of mux.handler: the body is read to its end first
    const parsing = createServer((req, res) => {
      req.resume();
      req.on("end", () => mux.handler(req, res));
    });
    const authority = await served(parsing);
    const r = await fetch(`http://${authority}/chat/v1/sessions/s1/seen`, {
      method: "POST",
      headers: { authorization: "Bearer s3cret", "content-type": "application/json" },
      body: JSON.stringify({ completion_settled_at_ms: 0 }),
    });
    expect([r.status, await r.json()]).toEqual([500, { error: "internal_error" }]);
    const logged = lines.find((line) => line.msg === "http internal error") as { err?: { message?: string } };
    expect(logged?.err?.message).toMatch(/mount mux\.handler before any body parser/);
  });

  it("logs a refused request under the path the client sent, base path included, its query cut off", async () => {
    const { logger, lines } = capturedLogger();
    const mux = await sessionmux({ basePath: "/chat", logger });
    const authority = await served(createServer((req, res) => mux.handler(req, res)));
    expect((await fetch(`http://${authority}/chat/api/chat/sessions?limit=5`)).status).toBe(401);
    await vi.waitFor(() => expect(lines.find((line) => line.msg === "request refused")).toBeDefined());
    expect(lines.find((line) => line.msg === "request refused")).toMatchObject({
      code: "unauthorized",
      path: "/chat/api/chat/sessions?…",
    });
  });

  it("names its host on every line, a refused request's and the shutdown's too, once each", async () => {
    const raw: string[] = [];
    const logger = pino({ level: "debug" }, { write: (line: string) => void raw.push(line) });
    const mux = await sessionmux({ basePath: "/chat", hostId: "edge-7", logger });
    const authority = await served(createServer((req, res) => mux.handler(req, res)));
    expect((await fetch(`http://${authority}/chat/api/chat/sessions`)).status).toBe(401);
    await mux.close();
    const lines = raw.map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(lines.map((line) => line.msg)).toEqual(
      expect.arrayContaining(["request refused", "shutdown complete"]),
    );
    expect(lines.filter((line) => line.hostId !== "edge-7")).toEqual([]);
    // the session host binds the id itself: no line carries it twice
    expect(raw.filter((line) => line.split('"hostId"').length !== 2)).toEqual([]);
  });

  it("attached to a server with no listeners of its own, answers 404 to other requests and upgrades", async () => {
    const mux = await sessionmux({ basePath: "/chat" });
    const server = createServer();
    mux.attach(server);
    const authority = await served(server);
    const r = await fetch(`http://${authority}/elsewhere`);
    expect([r.status, await r.json()]).toEqual([404, { error: "not_found" }]);
    expect(await upgradeStatus(`ws://${authority}/elsewhere`)).toBe(404);
    // the refusal says why, as the mux's own refusals do
    const socket = connect(Number(authority.split(":")[1]), "127.0.0.1");
    socket.on("error", () => undefined);
    await once(socket, "connect");
    const parts: Buffer[] = [];
    socket.on("data", (chunk: Buffer) => parts.push(chunk));
    socket.write(
      "GET /elsewhere HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
    );
    await once(socket, "close");
    const reply = Buffer.concat(parts).toString("utf8");
    expect(reply.slice(reply.indexOf("\r\n\r\n") + 4)).toBe(
      JSON.stringify({ error: "not_found", message: "no such route" }),
    );
    expect(
      await upgradeStatus(`ws://${authority}/chat/api/remote.mux`, { authorization: "Bearer s3cret" }),
    ).toBe(101);
  });

  it("detached, gives the server back to the app's own listeners", async () => {
    const mux = await sessionmux({ basePath: "/chat" });
    const server = createServer((_req, res) => res.writeHead(404).end("app 404"));
    server.on("upgrade", (_req, socket) =>
      socket.end("HTTP/1.1 418 I'm a teapot\r\nConnection: close\r\n\r\n"),
    );
    const detach = mux.attach(server);
    const authority = await served(server);
    expect((await fetch(`http://${authority}/chat/healthz`)).status).toBe(200);
    detach();
    const after = await fetch(`http://${authority}/chat/healthz`);
    expect([after.status, await after.text()]).toEqual([404, "app 404"]);
    expect(server.listenerCount("request")).toBe(1);
    expect(server.listenerCount("upgrade")).toBe(1);
    expect(
      await upgradeStatus(`ws://${authority}/chat/api/remote.mux`, { authorization: "Bearer s3cret" }),
    ).toBe(418);
  });

  it("answers a CORS preflight with the methods, headers and age it allows", async () => {
    const { authority } = await mountedApp(cleanups, { cors: ["https://app.example"] });
    const r = await fetch(`http://${authority}/chat/api/chat/sessions`, {
      method: "OPTIONS",
      headers: {
        origin: "https://app.example",
        "access-control-request-method": "DELETE",
        "access-control-request-headers": "authorization, content-type",
      },
    });
    expect(r.status).toBe(204);
    expect(r.headers.get("access-control-allow-methods")).toBe("GET,HEAD,POST,PUT,DELETE");
    expect(r.headers.get("access-control-allow-headers")).toBe("authorization,content-type");
    expect(r.headers.get("access-control-max-age")).toBe("600");
  });

  it("without origins, leaves a preflight to the host's routes: no CORS answer", async () => {
    const { authority } = await mountedApp(cleanups, { cors: [] });
    const r = await fetch(`http://${authority}/chat/api/chat/sessions`, {
      method: "OPTIONS",
      headers: { origin: "https://app.example", "access-control-request-method": "GET" },
    });
    expect(r.status).not.toBe(204);
    expect(r.headers.get("access-control-allow-origin")).toBeNull();
    expect(r.headers.get("access-control-allow-methods")).toBeNull();
  });

  it("answers /readyz from its periodic check, not anew per request", async () => {
    const mux = await sessionmux({ basePath: "/chat", readinessIntervalMs: 3_600_000 });
    const authority = await served(createServer((req, res) => mux.handler(req, res)));
    const first = (await (await fetch(`http://${authority}/chat/readyz`)).json()) as { checkedAt: number };
    await sleep(5);
    const second = (await (await fetch(`http://${authority}/chat/readyz`)).json()) as { checkedAt: number };
    expect(first).toMatchObject({ ready: true });
    expect(second.checkedAt).toBe(first.checkedAt);
  });

  it("closes once however often asked, and records the shutdown with its database and host", async () => {
    const { logger, lines } = capturedLogger();
    const dir = tempDir();
    cleanups.push(() => dir.remove());
    const mux = await createSessionmux({ db: dir.file("sessions.db"), tokens, logger, hostId: "host-a" });
    const closing = mux.close();
    expect(mux.close()).toBe(closing);
    await closing;
    const done = lines.filter((l) => l.msg === "shutdown complete");
    expect(done).toHaveLength(1);
    expect(done[0]).toMatchObject({ hostId: "host-a", db: expect.stringContaining(dir.file("sessions.db")) });
  });

  it("a host that fails to start closes its database again and gives the failure to the caller", async () => {
    const dir = tempDir();
    cleanups.push(() => dir.remove());
    const failing = (store: HostStore): HostStore =>
      new Proxy(store, {
        get(target, key) {
          if (key === "interruptOpenTurns") return () => Promise.reject(new Error("store gone at start"));
          const value = Reflect.get(target, key) as unknown;
          return typeof value === "function" ? value.bind(target) : value;
        },
      });
    await expect(
      startHost({ dbPath: dir.file("sessions.db"), port: 0, tokens, storeView: failing }),
    ).rejects.toThrow("store gone at start");
    // the database is not left locked: this process opens it again
    const again = await createSessionmux({ db: dir.file("sessions.db"), tokens });
    cleanups.push(() => again.close());
    expect(again.store).toBeDefined();
  });

  it("with app authentication, takes a mux upgrade on a server with no upgrade listener of its own", async () => {
    const mux = await sessionmux({ basePath: "/chat", authenticate: appAuthenticate });
    const server = createServer();
    mux.attach(server);
    const authority = await served(server);
    const url = `ws://${authority}/chat/api/remote.mux`;
    expect(await upgradeStatus(url, { authorization: "Bearer user:alice" })).toBe(101);
    expect(await upgradeStatus(url)).toBe(401);
  });

  it("with app authentication, outlives a client that resets its socket while it is authenticated", async () => {
    const settle: (() => void)[] = [];
    // the app's lookup hangs until the test settles it: `fail` with an error (a refusal), others
    // with a principal; `user:<name>` is answered at once
    const mux = await sessionmux({
      basePath: "/chat",
      authenticate: (req) => {
        if (req.headers.authorization === "Bearer fail")
          return new Promise((_resolve, reject) => settle.push(() => reject(new Error("lookup failed"))));
        if (req.headers.authorization === "Bearer hang")
          return new Promise((resolve) => settle.push(() => resolve({ name: "hang", admin: false })));
        return appAuthenticate(req);
      },
    });
    const server = createServer();
    mux.attach(server);
    const upgraded: Duplex[] = [];
    server.on("upgrade", (_req, socket: Duplex) => upgraded.push(socket));
    const authority = await served(server);
    for (const authorization of ["Bearer fail", "Bearer hang"]) {
      const socket = connect(Number(authority.split(":")[1]), "127.0.0.1");
      socket.on("error", () => undefined);
      await once(socket, "connect");
      socket.write(upgradeRequest([`Authorization: ${authorization}`], "/chat/api/remote.mux"));
      await vi.waitFor(() => expect(settle).toHaveLength(1));
      // the client goes away with a reset before the app has answered: the host's end of the socket
      // errors (ECONNRESET), which unheard would be an uncaught exception ending the app's process
      socket.resetAndDestroy();
      await vi.waitFor(() => expect(upgraded.at(-1)?.destroyed).toBe(true));
      for (const answer of settle.splice(0)) answer();
    }
    expect(
      await upgradeStatus(`ws://${authority}/chat/api/remote.mux`, { authorization: "Bearer user:alice" }),
    ).toBe(101);
  });

  it("checks readiness at the interval it is given, and by default not per request", async () => {
    const often = await sessionmux({ basePath: "/chat", readinessIntervalMs: 10 });
    const rarely = await sessionmux({ basePath: "/chat" });
    const readyz = async (authority: string) =>
      ((await (await fetch(`http://${authority}/chat/readyz`)).json()) as { checkedAt: number }).checkedAt;
    const oftenAt = await served(createServer((req, res) => often.handler(req, res)));
    const rarelyAt = await served(createServer((req, res) => rarely.handler(req, res)));
    const first = await readyz(oftenAt);
    await vi.waitFor(async () => expect(await readyz(oftenAt)).toBeGreaterThan(first), {
      timeout: 2_000,
      interval: 20,
    });
    const before = await readyz(rarelyAt);
    await sleep(5);
    expect(await readyz(rarelyAt)).toBe(before);
  });

  it("hands the host its principals' session bound and its idle detach", async () => {
    const dir = tempDir();
    cleanups.push(() => dir.remove());
    const running = await startHost({
      dbPath: dir.file("sessions.db"),
      port: 0,
      tokens,
      principals: { maxSessionsPerPrincipal: 1 },
      idleDetachMs: 50,
    });
    cleanups.push(() => running.close());
    const alice = { name: "alice", admin: false };
    await running.host.call(alice, "session.create", { sessionId: "one" });
    await expect(running.host.call(alice, "session.create", { sessionId: "two" })).rejects.toMatchObject({
      code: "too_many_sessions",
    });
    await running.host.call(ADMIN, "session.create", { sessionId: "idle" });
    await running.host.call(ADMIN, "session.prompt", {
      sessionId: "idle",
      text: "hi",
      clientMessageId: "m1",
    });
    await vi.waitFor(() => expect(running.host.live.agents().map((a) => a.sessionId)).not.toContain("idle"), {
      timeout: 5_000,
      interval: 20,
    });
  });

  it("sweeps an upload no prompt references once the upload lifetime it is given has passed", async () => {
    const dir = tempDir();
    cleanups.push(() => dir.remove());
    const running = await startHost({ dbPath: dir.file("sessions.db"), port: 0, tokens, uploadTtlMs: 1_000 });
    cleanups.push(() => running.close());
    const id = await running.host.putAttachment(
      { name: "alice", admin: false },
      { name: "a.txt", type: "text/plain", bytes: new Uint8Array([1, 2, 3]) },
    );
    expect(await running.store.getAttachment(id)).not.toBeNull();
    // the sweep runs every quarter of the lifetime, at least every second
    await vi.waitFor(async () => expect(await running.store.getAttachment(id)).toBeNull(), {
      timeout: 5_000,
      interval: 50,
    });
  });

  it("sweeps uploads every quarter of their lifetime: an expired upload goes at the next quarter, not sooner", async () => {
    // the host's clock and the sweep's timer move only when the test says
    vi.useFakeTimers({ toFake: ["setInterval", "clearInterval", "Date"] });
    cleanups.push(() => {
      vi.useRealTimers();
    });
    const dir = tempDir();
    cleanups.push(() => dir.remove());
    const mounted = await mountSessionmux(
      { db: dir.file("sessions.db"), tokens, uploadTtlMs: 8_000, processMetrics: false },
      { claimAll: false },
    );
    cleanups.push(() => mounted.close());
    const id = await mounted.host.putAttachment(
      { name: "alice", admin: false },
      { name: "a.txt", type: "text/plain", bytes: new Uint8Array([1, 2, 3]) },
    );
    // sweeps at 2, 4, 6 and 8 s: the one at 8 s finds it just at its lifetime, not past it
    await vi.advanceTimersByTimeAsync(9_500);
    expect(await mounted.store.getAttachment(id)).not.toBeNull();
    await vi.advanceTimersByTimeAsync(500);
    expect(await mounted.store.getAttachment(id)).toBeNull();
  });

  it("hands the host its stop grace: a cancelled turn whose agent does not return is closed after it", async () => {
    const dir = tempDir();
    cleanups.push(() => dir.remove());
    const hung: { ctx?: TurnContext; release?: () => void } = {};
    // the agent's turn hangs, deaf to its abort signal, until the test releases it
    const agent = demoAgentWith("hanging", (turn) => {
      hung.ctx = turn;
      return new Promise((resolve) => {
        hung.release = () => resolve({ state: "completed" });
      });
    });
    const { logger, lines } = capturedLogger();
    const mounted = await mountSessionmux(
      { db: dir.file("sessions.db"), tokens, agent, turnStopGraceMs: 50, logger },
      { claimAll: false },
    );
    cleanups.push(() => mounted.close());
    cleanups.push(() => hung.release?.());
    await mounted.host.call(ADMIN, "session.create", { sessionId: "s" });
    await mounted.host.call(ADMIN, "session.prompt", { sessionId: "s", text: "hang", clientMessageId: "m1" });
    await vi.waitFor(() => expect(hung.ctx).toBeDefined(), { timeout: 5_000, interval: 10 });
    await mounted.host.call(ADMIN, "session.cancel", { sessionId: "s" });
    await vi.waitFor(
      () =>
        expect(lines.filter((l) => String(l.msg).startsWith("the agent did not return"))).toEqual([
          expect.objectContaining({ stopGraceMs: 50 }),
        ]),
      { timeout: 3_000, interval: 20 },
    );
  });

  it("without a logger of the app's, writes no log line of its own", async () => {
    const written = vi.spyOn(process.stdout, "write");
    cleanups.push(() => written.mockRestore());
    const dir = tempDir();
    cleanups.push(() => dir.remove());
    const mux = await createSessionmux({ db: dir.file("sessions.db"), tokens });
    await mux.close();
    expect(written.mock.calls.filter(([chunk]) => String(chunk).includes("shutdown complete"))).toEqual([]);
  });

  it("gives the database the app's logger: a commit listener that throws is logged there", async () => {
    const dir = tempDir();
    cleanups.push(() => dir.remove());
    const { logger, lines } = capturedLogger();
    const mounted = await mountSessionmux(
      { db: dir.file("sessions.db"), tokens, logger },
      { claimAll: false },
    );
    cleanups.push(() => mounted.close());
    const stop = mounted.store.subscribeAll(() => {
      throw new Error("listener broke");
    });
    await mounted.host.call(ADMIN, "session.create", { sessionId: "s" });
    stop();
    expect(
      lines.filter((l) => l.level === 50 && JSON.stringify(l.err).includes("listener broke")),
    ).not.toEqual([]);
  });

  it("leaves an upgrade it does not take to the app's own upgrade listener, untouched", async () => {
    const mux = await sessionmux({ basePath: "/chat" });
    const echo = new WebSocketServer({ noServer: true });
    echo.on("connection", (ws) => ws.on("message", (data) => ws.send(data)));
    cleanups.push(() => new Promise<void>((resolve) => echo.close(() => resolve())));
    const server = createServer();
    server.on("upgrade", (req, socket, head) => {
      if (req.url === "/app-socket")
        echo.handleUpgrade(req, socket, head, (ws) => echo.emit("connection", ws));
    });
    mux.attach(server);
    const authority = await served(server);
    const client = new WebSocket(`ws://${authority}/app-socket`);
    cleanups.push(() => client.terminate());
    await once(client, "open");
    client.send("ping");
    const [reply] = (await once(client, "message")) as [Buffer];
    expect(reply.toString()).toBe("ping");
  });
});
