import { once } from "node:events";
import { mkdirSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { type AddressInfo, connect } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { Authenticator } from "../../../src/transport/auth.js";
import { createHttpHandler, type HttpOptions, isHostRoute } from "../../../src/transport/http/router.js";
import { HostMetrics } from "../../../src/transport/metrics.js";
import { ADMIN_TOKEN, ALICE_TOKEN, startTestHost, type TestHost } from "../../support/host.js";
import { capturedLogger } from "../../support/log-capture.js";
import { tempDir } from "../../support/temp-dir.js";
import { api } from "./http-client.js";

/**
 * The host's HTTP handler itself (protocol-v1 §8): request targets, the probes, which paths need a
 * token, the refusals' headers, and how each request is counted. Real hosts and servers on 127.0.0.1.
 */

let h: TestHost | undefined;
let server: Server | undefined;
afterEach(async () => {
  if (server) {
    server.closeAllConnections();
    await new Promise((resolve) => server!.close(resolve));
    server = undefined;
  }
  await h?.dispose();
  h = undefined;
});

/** A server of the host's handler alone, given `options`; answers as `api` reads them. */
async function handlerServer(options: Partial<HttpOptions>): Promise<TestHost> {
  h = await startTestHost();
  const auth = new Authenticator([
    { name: "admin", secret: ADMIN_TOKEN, admin: true },
    { name: "alice", secret: ALICE_TOKEN, admin: false },
  ]);
  server = createServer(createHttpHandler(h.host, auth, options));
  await new Promise<void>((resolve) => server!.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return { ...h, port } as TestHost;
}

/** Writes one raw request and reads the answer until the host closes or the head and body are in. */
async function rawRequest(port: number, text: string): Promise<string> {
  const socket = connect(port, "127.0.0.1");
  socket.on("error", () => undefined);
  await once(socket, "connect");
  const parts: Buffer[] = [];
  socket.on("data", (chunk: Buffer) => parts.push(chunk));
  socket.end(text);
  await once(socket, "close");
  return Buffer.concat(parts).toString("latin1");
}

const counted = (text: string, route: string, status: number) =>
  new RegExp(`sessionmux_http_requests_total\\{route="${route}",status="${status}"\\} (\\d+)\\n`).exec(
    text,
  )?.[1];

describe("the host's HTTP handler", () => {
  it("a request target that is not a path is 400 bad_request", async () => {
    h = await startTestHost();
    for (const target of ["http://127.0.0.1/healthz", "*", "//"]) {
      const reply = await rawRequest(
        h.port,
        `GET ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`,
      );
      expect([target, reply.split("\r\n")[0]]).toEqual([target, "HTTP/1.1 400 Bad Request"]);
      expect([target, reply.slice(reply.indexOf("\r\n\r\n") + 4)]).toEqual([
        target,
        JSON.stringify({ error: "bad_request", message: "unparseable request target" }),
      ]);
    }
  });

  it("/healthz and /readyz answer GET and HEAD without a token; other methods are not found", async () => {
    let state: { ready: boolean; checkedAt: number; reason?: string } = { ready: true, checkedAt: 5 };
    const host = await handlerServer({ readiness: () => state });
    const health = await api(host, "/healthz");
    expect([health.status, health.json]).toEqual([200, { ok: true }]);
    expect((await api(host, "/healthz", { method: "HEAD" })).status).toBe(200);
    const ready = await api(host, "/readyz");
    expect([ready.status, ready.json, ready.headers["cache-control"]]).toEqual([
      200,
      { ready: true, checkedAt: 5 },
      "no-store",
    ]);
    state = { ready: false, checkedAt: 7, reason: "db_unavailable" };
    const down = await api(host, "/readyz");
    expect([down.status, down.json, down.headers["cache-control"]]).toEqual([
      503,
      { ready: false, checkedAt: 7, reason: "db_unavailable" },
      "no-store",
    ]);
    expect((await api(host, "/readyz", { method: "HEAD" })).status).toBe(503);
    for (const path of ["/healthz", "/readyz"]) {
      const r = await api(host, path, { method: "POST", body: "{}" });
      expect([path, r.status, r.json]).toEqual([path, 404, { error: "not_found" }]);
    }
  });

  it("without a readiness check /readyz answers ready, with the time it answered", async () => {
    const host = await handlerServer({});
    const before = Date.now();
    const ready = await api(host, "/readyz");
    expect(ready.status).toBe(200);
    const { ready: isReady, checkedAt } = ready.json as { ready: boolean; checkedAt: number };
    expect(isReady).toBe(true);
    expect(checkedAt).toBeGreaterThanOrEqual(before);
    expect(checkedAt).toBeLessThanOrEqual(Date.now());
  });

  it("/metrics, /api/ and /v1/ need a token, the rest is the console; a 401 names its scheme", async () => {
    const host = await handlerServer({ metrics: new HostMetrics() });
    for (const path of [
      "/metrics",
      "/api/chat/sessions",
      "/api/anything",
      "/v1/anything",
      "/v1/sessions/x",
    ]) {
      const r = await api(host, path);
      expect([path, r.status, r.json, r.headers["www-authenticate"]]).toEqual([
        path,
        401,
        { error: "unauthorized" },
        'Bearer realm="sessionmux"',
      ]);
    }
    for (const path of ["/apix", "/v1x", "/metricsx", "/nothing.js", "/api", "/v1"]) {
      const r = await api(host, path);
      expect([path, r.status]).toEqual([path, 404]);
      expect(r.headers["www-authenticate"]).toBeUndefined();
    }
    // a console path takes GET and HEAD only
    expect((await api(host, "/", { method: "DELETE" })).status).toBe(404);
    // refused for its origin or its rights: no scheme to offer
    const foreign = await api(host, "/v1/anything", {
      token: ALICE_TOKEN,
      headers: { origin: "https://x.example" },
    });
    expect([foreign.status, foreign.json, foreign.headers["www-authenticate"]]).toEqual([
      403,
      { error: "forbidden_origin" },
      undefined,
    ]);
    const metricsForeign = await api(host, "/metrics", {
      token: ADMIN_TOKEN,
      headers: { origin: "https://x.example" },
    });
    expect([metricsForeign.status, metricsForeign.json]).toEqual([403, { error: "forbidden_origin" }]);
    const forbidden = await api(host, "/metrics", { token: ALICE_TOKEN });
    expect([forbidden.status, forbidden.headers["www-authenticate"]]).toEqual([403, undefined]);
    const served = await api(host, "/metrics", { token: ADMIN_TOKEN });
    expect([served.status, served.headers["cache-control"]]).toEqual([200, "no-store"]);
    expect(served.headers["content-type"]).toMatch(/^text\/plain/);
  });

  it("a handler without metrics has no /metrics route", async () => {
    const host = await handlerServer({});
    const r = await api(host, "/metrics", { token: ADMIN_TOKEN });
    expect([r.status, r.json]).toEqual([404, { error: "not_found" }]);
    expect((await api(host, "/metrics")).status).toBe(401);
  });

  it("counts each request under its route and status once it is answered", async () => {
    const metrics = new HostMetrics();
    const host = await handlerServer({ metrics });
    await api(host, "/healthz");
    await api(host, "/readyz");
    await api(host, "/nothing.js");
    await api(host, "/v1/nothing", { token: ALICE_TOKEN });
    await api(host, "/v1/nothing");
    await api(host, "/api/chat/sessions", { token: ALICE_TOKEN });
    await api(host, "/metrics", { token: ALICE_TOKEN });
    const text = await metrics.registry.metrics();
    expect(counted(text, "GET /healthz", 200)).toBe("1");
    expect(counted(text, "GET /readyz", 200)).toBe("1");
    expect(counted(text, "static", 404)).toBe("1");
    expect(counted(text, "unmatched", 404)).toBe("1");
    expect(counted(text, "unmatched", 401)).toBe("1");
    expect(counted(text, "GET /api/chat/sessions", 200)).toBe("1");
    expect(counted(text, "GET /metrics", 403)).toBe("1");
    expect(text).toMatch(/sessionmux_http_request_seconds_count\{route="GET \/healthz"\} 1\n/);
  });

  it("a body refused as too large is answered with Connection: close, and the host ends the connection", async () => {
    h = await startTestHost();
    const body = Buffer.alloc(1024 * 1024 + 1, 32);
    const head =
      `POST /v1/sessions/x/seen HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${ALICE_TOKEN}\r\n` +
      `Content-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`;
    const socket = connect(h.port, "127.0.0.1");
    socket.on("error", () => undefined);
    await once(socket, "connect");
    const parts: Buffer[] = [];
    socket.on("data", (chunk: Buffer) => parts.push(chunk));
    socket.write(head);
    // the host ends its side without the body being sent
    await once(socket, "end");
    const reply = Buffer.concat(parts).toString("latin1");
    expect(reply.split("\r\n")[0]).toBe("HTTP/1.1 413 Payload Too Large");
    expect(reply.toLowerCase()).toContain("\r\nconnection: close\r\n");
    socket.destroy();
    // another refusal keeps the connection
    const kept = await api(h, "/v1/sessions/x/seen", { method: "POST", token: ALICE_TOKEN, body: "{" });
    expect([kept.status, kept.headers.connection]).toEqual([400, "keep-alive"]);
  });

  it("claims its own paths on a shared root, whatever the method", () => {
    for (const path of [
      "/healthz",
      "/readyz",
      "/metrics",
      "/v1/sessions/x",
      "/api/chat/sessions",
      "/v1/attachments",
    ])
      expect([path, isHostRoute(path)]).toEqual([path, true]);
    for (const path of ["/", "/healthzx", "/readyz/", "/metrics/x", "/v1/nothing", "/app/v1/sessions/x"])
      expect([path, isHostRoute(path)]).toEqual([path, false]);
  });

  it("logs an unexpected failure with its route and method, and no client mistake", async () => {
    const { logger, lines } = capturedLogger();
    const host = await handlerServer({ logger });
    await api(host, "/v1/nothing", { token: ALICE_TOKEN });
    await api(host, "/v1/nothing");
    await api(host, "/api/chat/sessions?limit=0", { token: ALICE_TOKEN });
    await api(host, "/v1/sessions/nope", { token: ALICE_TOKEN });
    expect(lines.filter((l) => l.msg === "http internal error")).toEqual([]);
    await h!.store.close();
    const failed = await api(host, "/v1/sessions/anything", { token: ALICE_TOKEN });
    expect([failed.status, failed.json]).toEqual([500, { error: "internal_error" }]);
    const logged = lines.filter((l) => l.msg === "http internal error");
    expect(logged).toHaveLength(1);
    expect(logged[0]).toMatchObject({ route: "GET /v1/sessions/:id", method: "GET", err: expect.anything() });
  });

  it("counts a request it could not route as unmatched, and its time in seconds", async () => {
    const metrics = new HostMetrics();
    const host = await handlerServer({ metrics });
    const reply = await rawRequest(
      host.port,
      "GET * HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
    );
    expect(reply.split("\r\n")[0]).toBe("HTTP/1.1 400 Bad Request");
    expect(counted(await metrics.registry.metrics(), "unmatched", 400)).toBe("1");
    const started = performance.now();
    await api(host, "/healthz");
    const elapsedSeconds = (performance.now() - started) / 1000;
    const seconds = (await metrics.httpSeconds.get()).values.find(
      (v) => v.metricName === "sessionmux_http_request_seconds_sum" && v.labels.route === "GET /healthz",
    )?.value;
    expect(seconds).toBeGreaterThanOrEqual(0);
    expect(seconds).toBeLessThanOrEqual(elapsedSeconds);
  });

  it("serves the console to GET and HEAD; /metrics answers GET only", async () => {
    const dir = tempDir();
    const webRoot = `${dir.path}/web`;
    mkdirSync(webRoot);
    writeFileSync(`${webRoot}/index.html`, "<!doctype html><title>console</title>");
    try {
      const host = await handlerServer({ webRoot, metrics: new HostMetrics() });
      const get = await api(host, "/");
      expect([get.status, get.text]).toEqual([200, "<!doctype html><title>console</title>"]);
      const head = await api(host, "/", { method: "HEAD" });
      expect([head.status, head.text, head.headers["content-type"]]).toEqual([
        200,
        "",
        get.headers["content-type"],
      ]);
      expect((await api(host, "/", { method: "POST", body: "x" })).status).toBe(404);
      const post = await api(host, "/metrics", { method: "POST", token: ADMIN_TOKEN, body: "x" });
      expect([post.status, post.json]).toEqual([404, { error: "not_found" }]);
    } finally {
      dir.remove();
    }
  });

  it("takes the token from the Authorization header only, never from a WebSocket subprotocol", async () => {
    const host = await handlerServer({});
    const subprotocol = `bearer.${Buffer.from(ALICE_TOKEN).toString("base64url")}`;
    const r = await api(host, "/api/chat/sessions", { headers: { "sec-websocket-protocol": subprotocol } });
    expect([r.status, r.json]).toEqual([401, { error: "unauthorized" }]);
    expect((await api(host, "/api/chat/sessions", { token: ALICE_TOKEN })).status).toBe(200);
  });

  it("answers an unexpected failure 500 without a logger too", async () => {
    const host = await handlerServer({});
    await h!.store.close();
    const failed = await api(host, "/v1/sessions/anything", { token: ALICE_TOKEN });
    expect([failed.status, failed.json]).toEqual([500, { error: "internal_error" }]);
  });
});
