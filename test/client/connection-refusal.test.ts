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
import { ADMIN_TOKEN, ALICE_TOKEN, BOB_TOKEN, startTestHost, type TestHost } from "../support/host.js";
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

describe("a principal holding the most sockets the host allows", () => {
  /** A real host that lets each ordinary principal hold one socket. */
  async function oneSocketHost(): Promise<TestHost> {
    const h = await startTestHost({ principals: { maxSocketsPerPrincipal: 1 } });
    cleanups.push(() => h.dispose());
    return h;
  }
  /** Holds alice's one socket until `close` is called; alice's session `held` exists. */
  async function holdSocket(h: TestHost): Promise<SessionmuxClient> {
    const holder = createNodeClient({ url: h.wsUrl, token: ALICE_TOKEN });
    cleanups.push(() => holder.close());
    await holder.create({ sessionId: "held" });
    return holder;
  }
  // Without being told, a call would wait for a socket until this runs out and end `timeout`.
  const call = { timeoutMs: 5_000 };

  for (const [kind, connect] of [
    ["the Node client", (url: string) => createNodeClient({ url, token: ALICE_TOKEN, backoff: fast })],
    // the token as the `bearer.` subprotocol entry, and no upgrade status to read: a browser's view
    [
      "a browser-style client",
      (url: string) => createClient({ url, token: ALICE_TOKEN, WebSocket, backoff: fast }),
    ],
  ] as const) {
    it(`${kind} is told too_many_connections: its state names 429, calls fail with it, it retries and connects once a socket frees up`, async () => {
      const h = await oneSocketHost();
      const holder = await holdSocket(h);
      const client = connect(h.wsUrl);
      const seen = track(client);
      const updates: FollowUpdate[] = [];
      let failure: unknown;
      const sub = client
        .follow("held")
        .subscribe({ next: (u) => updates.push(u), error: (e) => (failure = e) });
      cleanups.push(() => sub.unsubscribe());

      const error = await client.list({}, call).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ConnectionRefusedError);
      expect(error).toMatchObject({
        code: "too_many_connections",
        status: 429,
        retryable: true,
        terminal: false,
      });
      expect(client.state).toMatchObject({ name: "backoff", status: 429 });
      // still retrying with backoff, as for any passing refusal
      await vi.waitFor(() =>
        expect(seen.filter((s) => s.name === "backoff" && s.status === 429).length).toBeGreaterThanOrEqual(2),
      );
      expect(seen.some((s) => s.name === "unauthorized" || s.name === "rejected")).toBe(false);

      await holder.close();
      await vi.waitFor(() => expect(client.state.name).toBe("open"));
      expect(await client.list({}, call)).toHaveProperty("sessions");
      // a follow opened while refused waited for the socket rather than failing
      await vi.waitFor(() => expect(updates.some((u) => u.kind === "caughtUp")).toBe(true));
      expect(failure).toBeUndefined();
    });
  }

  it("the host's refusal neither takes the principal's socket nor greets it, and other principals connect", async () => {
    const h = await oneSocketHost();
    await holdSocket(h);
    const refused = new WebSocket(h.wsUrl, [SUBPROTOCOL], {
      headers: { Authorization: `Bearer ${ALICE_TOKEN}` },
    });
    const frames: unknown[] = [];
    refused.on("message", (data) => frames.push(data));
    const [code, reason] = (await once(refused, "close")) as [number, Buffer];
    expect(code).toBe(4429);
    expect(JSON.parse(reason.toString())).toEqual({
      error: "too_many_connections",
      message: "at most 1 sockets per principal; close one first",
    });
    expect(frames).toEqual([]);
    const bob = createNodeClient({ url: h.wsUrl, token: BOB_TOKEN });
    cleanups.push(() => bob.close());
    expect(await bob.list({}, call)).toHaveProperty("sessions");
  });

  it("a host that refuses with HTTP 429 at the upgrade (before the close code) is told the same to the Node client", async () => {
    const h = await refusingHost(429, () => 426);
    const client = createNodeClient({
      url: `ws://127.0.0.1:${h.port}/api/remote.mux`,
      token: "t",
      backoff: fast,
    });
    track(client);
    await expect(client.list({}, call)).rejects.toMatchObject({ code: "too_many_connections", status: 429 });
    expect(client.state).toMatchObject({ name: "backoff", status: 429 });
  });

  it("a 503 at the upgrade is named in the backoff state, but calls wait through it: load passes, and a proxy says 503 while a host restarts", async () => {
    const h = await refusingHost(503, () => 426);
    const client = createNodeClient({
      url: `ws://127.0.0.1:${h.port}/api/remote.mux`,
      token: "t",
      backoff: fast,
    });
    const seen = track(client);
    const listing = client.list({}, { timeoutMs: 1_000 }).catch((e: unknown) => e);
    await vi.waitFor(() => expect(seen.some((s) => s.name === "backoff" && s.status === 503)).toBe(true));
    expect(await listing).toMatchObject({ code: "timeout" });
  });
});
