import { once } from "node:events";
import { createServer, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, expect, it, vi } from "vitest";
import WebSocket from "ws";
import { SUBPROTOCOL } from "../../protocol/index.js";
import type { ConnectionState } from "../../src/client/connection-state.js";
import type { FollowUpdate } from "../../src/client/follow-cursor.js";
import { followSession } from "../../src/client/follow-session.js";
import { createClient, type SessionmuxClient } from "../../src/client/index.js";
import { createNodeClient } from "../../src/client/node.js";
import { ConnectionRefusedError } from "../../src/client/remote-errors.js";
import { browserSocketFactory, type WebSocketLike } from "../../src/client/socket.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { ADMIN_TOKEN, startTestHost, type TestHost } from "../support/host.js";
import { listenOnLoopback } from "../support/loopback-server.js";
import { startFakePeer } from "./fake-peer.js";

const cleanups = cleanupsAfterEach();
async function host(): Promise<TestHost> {
  const h = await startTestHost();
  cleanups.push(() => h.dispose());
  return h;
}
function track(client: SessionmuxClient): ConnectionState[] {
  cleanups.push(() => client.close());
  const seen: ConnectionState[] = [];
  const sub = client.state$.subscribe((s) => seen.push(s));
  cleanups.push(() => sub.unsubscribe());
  return seen;
}
const fast = { baseMs: 5, capMs: 20 };

describe("honest connection states against a real host", () => {
  it("a wrong path (HTTP 404 at upgrade) is the terminal rejected state; calls settle with not_found", async () => {
    const h = await host();
    const url = h.wsUrl.replace("/api/remote.mux", "/api/wrong.mux");
    const client = createNodeClient({ url, token: ADMIN_TOKEN, backoff: fast });
    const seen = track(client);
    const error = await client.list().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConnectionRefusedError);
    expect(error).toMatchObject({ code: "not_found", status: 404 });
    expect(seen.map((s) => s.name)).toEqual(["connecting", "rejected"]);
    await expect(client.list()).rejects.toMatchObject({ code: "not_found" });
    expect(seen.map((s) => s.name)).toEqual(["connecting", "rejected"]);
  });

  it("a browser-style client learns a refused token over HTTP, waits unauthorized, and resumes its follow after setToken", async () => {
    const h = await host();
    const admin = createNodeClient({ url: h.wsUrl, token: ADMIN_TOKEN });
    cleanups.push(() => admin.close());
    await admin.create({ sessionId: "tok" });

    const client = createClient({ url: h.wsUrl, token: "stale-token", WebSocket, backoff: fast });
    const seen = track(client);
    const updates: FollowUpdate[] = [];
    let failure: unknown;
    const sub = followSession(client, "tok").subscribe({
      next: (u) => updates.push(u),
      error: (e) => (failure = e),
    });
    cleanups.push(() => sub.unsubscribe());
    await vi.waitFor(() => expect(client.state).toEqual({ name: "unauthorized", status: 401 }));
    await expect(client.list()).rejects.toMatchObject({ code: "unauthorized", status: 401 });
    expect(seen.filter((s) => s.name === "connecting")).toHaveLength(1);

    client.setToken(ADMIN_TOKEN);
    await vi.waitFor(() => expect(updates.some((u) => u.kind === "caughtUp")).toBe(true));
    expect(client.state.name).toBe("open");
    expect(failure).toBeUndefined();
    const { seq } = await admin.call("session.rename", { sessionId: "tok", title: "after" });
    await vi.waitFor(() =>
      expect(updates.some((u) => u.kind === "events" && u.events.some((e) => e.seq === seq))).toBe(true),
    );
  });
});

/**
 * A host on 127.0.0.1 that fails every WebSocket upgrade with `upgradeStatus`, which a browser
 * never gets to see, and answers plain HTTP requests (the client's question about the refusal)
 * with what `answer` says. It keeps each question's path and Authorization header.
 */
async function refusingHost(upgradeStatus: number, answer: (req: IncomingMessage) => number) {
  const questions: { path: string | undefined; authorization: string | undefined }[] = [];
  const server = createServer((req, res) => {
    questions.push({ path: req.url, authorization: req.headers.authorization });
    res.writeHead(answer(req)).end("no");
  });
  server.on("upgrade", (_req, socket) => {
    // the client may reset the connection as it reads the refusal
    socket.on("error", () => socket.destroy());
    socket.end(`HTTP/1.1 ${upgradeStatus} No\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`);
  });
  const port = await listenOnLoopback(server, cleanups);
  return { port, questions };
}
/** 401 unless the question carries `Bearer good`; then `passed`. */
const checksToken = (passed: number) => (req: IncomingMessage) =>
  req.headers.authorization === "Bearer good" ? passed : 401;

describe("a browser-style client asks the host why its upgrade failed", () => {
  it("asks at the socket's URL over HTTP with its token, and a 401 answer is the unauthorized state", async () => {
    const h = await refusingHost(401, checksToken(426));
    const client = createClient({ url: `ws://127.0.0.1:${h.port}/api/remote.mux`, token: "bad", WebSocket });
    track(client);
    await vi.waitFor(() => expect(client.state).toEqual({ name: "unauthorized", status: 401 }));
    expect(h.questions).toEqual([{ path: "/api/remote.mux", authorization: "Bearer bad" }]);
  });

  it("a 403 answer is the unauthorized state with 403", async () => {
    const h = await refusingHost(403, () => 403);
    const client = createClient({ url: `ws://127.0.0.1:${h.port}/api/remote.mux`, token: "good", WebSocket });
    track(client);
    await vi.waitFor(() => expect(client.state).toEqual({ name: "unauthorized", status: 403 }));
  });

  it("an answer that accepts the token (here 426) leaves the client retrying, as for a host that is down", async () => {
    const h = await refusingHost(503, checksToken(426));
    const client = createClient({
      url: `ws://127.0.0.1:${h.port}/api/remote.mux`,
      token: "good",
      WebSocket,
      backoff: fast,
    });
    const seen = track(client);
    await vi.waitFor(() => expect(h.questions.length).toBeGreaterThanOrEqual(2));
    expect(h.questions[0]).toEqual({ path: "/api/remote.mux", authorization: "Bearer good" });
    await vi.waitFor(() => expect(seen.filter((s) => s.name === "backoff").length).toBeGreaterThanOrEqual(2));
    expect(seen.some((s) => s.name === "unauthorized" || s.name === "rejected")).toBe(false);
  });

  it("an http:// URL is asked as given, even with ws in its path", async () => {
    const h = await refusingHost(401, (req) => (req.url === "/ws/remote.mux" ? 401 : 404));
    const client = createClient({ url: `http://127.0.0.1:${h.port}/ws/remote.mux`, token: "bad", WebSocket });
    track(client);
    await vi.waitFor(() => expect(client.state).toEqual({ name: "unauthorized", status: 401 }));
    expect(h.questions.map((q) => q.path)).toEqual(["/ws/remote.mux"]);
  });

  it("a custom factory that marks the socket authRejected is believed without asking", async () => {
    const p = await startFakePeer({ refuse: () => 403 });
    cleanups.push(() => p.stop());
    const client = createClient({
      url: p.url,
      token: "t",
      socketFactory: (url, token) => {
        const socket = new WebSocket(url, [SUBPROTOCOL], { headers: { Authorization: `Bearer ${token}` } });
        socket.on("unexpected-response", (request, response) => {
          (socket as unknown as WebSocketLike).authRejected = response.statusCode as 403;
          request.destroy();
          socket.terminate();
        });
        return socket as unknown as WebSocketLike;
      },
    });
    track(client);
    await vi.waitFor(() => expect(client.state).toEqual({ name: "unauthorized", status: 403 }));
    expect(p.attempts).toBe(1);
  });
  it("when the question itself fails (nothing listens), the client keeps retrying as for a host that is down", async () => {
    const server = createServer();
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    const { port } = server.address() as AddressInfo;
    await new Promise<void>((resolve) => server.close(() => resolve()));
    const client = createClient({
      url: `ws://127.0.0.1:${port}/api/remote.mux`,
      token: "t",
      WebSocket,
      backoff: fast,
    });
    const seen = track(client);
    await vi.waitFor(() => expect(seen.filter((s) => s.name === "backoff").length).toBeGreaterThanOrEqual(2));
    expect(seen.some((s) => s.name === "unauthorized" || s.name === "rejected")).toBe(false);
  });
});

describe("browserSocketFactory: the socket's upgradeStatus question", () => {
  /** A socket from the browser factory against `h`, with its events drained. */
  function browserSocket(port: number, token: string): WebSocketLike {
    const socket = browserSocketFactory(WebSocket)(`ws://127.0.0.1:${port}/api/remote.mux`, token);
    socket.onerror = () => {};
    socket.onclose = () => {};
    cleanups.push(() => socket.close());
    return socket;
  }

  it("answers the host's 401 and 403, and leaves any other answer unknown", async () => {
    for (const status of [401, 403]) {
      const h = await refusingHost(status, () => status);
      await expect(browserSocket(h.port, "bad").upgradeStatus?.()).resolves.toBe(status);
    }
    const h = await refusingHost(503, () => 500);
    await expect(browserSocket(h.port, "bad").upgradeStatus?.()).resolves.toBeUndefined();
  });

  it("an answer without a body (204) is unknown, not a failed question", async () => {
    const h = await refusingHost(503, () => 204);
    await expect(browserSocket(h.port, "t").upgradeStatus?.()).resolves.toBeUndefined();
    expect(h.questions).toEqual([{ path: "/api/remote.mux", authorization: "Bearer t" }]);
  });

  it("a runtime without fetch leaves the status unknown and asks nothing", async () => {
    const h = await refusingHost(401, () => 401);
    const socket = browserSocket(h.port, "bad");
    vi.stubGlobal("fetch", undefined);
    try {
      await expect(socket.upgradeStatus?.()).resolves.toBeUndefined();
    } finally {
      vi.unstubAllGlobals();
    }
    expect(h.questions).toEqual([]);
  });
});
