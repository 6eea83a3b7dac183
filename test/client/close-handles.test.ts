import { once } from "node:events";
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from "node:http";
import { type AddressInfo, createServer, type Socket } from "node:net";
import { describe, expect, it, vi } from "vitest";
import WebSocket from "ws";
import { createClient } from "../../src/client/index.js";
import { createNodeClient } from "../../src/client/node.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { listenOnLoopback } from "../support/loopback-server.js";
import { startFakePeer } from "./fake-peer.js";

/**
 * Polls without `vi.waitFor`, whose own timers would show up as active resources: each check runs
 * after its timer fired, when no timer of ours is pending. Gives up after 5 s.
 */
/** True when `after` holds no resource type more often than `before` did. */
function noneAdded(before: string[], after: string[]): boolean {
  const count = (list: string[], type: string) => list.filter((r) => r === type).length;
  return after.every((type) => count(after, type) <= count(before, type));
}

async function settledResources(expected: string[]): Promise<string[]> {
  const deadline = Date.now() + 5_000;
  for (;;) {
    const now = resources();
    if (noneAdded(expected, now) || Date.now() > deadline) return now;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

const resources = () =>
  process
    .getActiveResourcesInfo()
    .filter((r) => r !== "TTYWrap")
    .sort();

const cleanups = cleanupsAfterEach(() => vi.restoreAllMocks());

describe("client.close() handles", () => {
  it("leaves no timer or socket behind, whether open or backing off", async () => {
    const p = await startFakePeer();
    const refusing = await startFakePeer({ refuse: () => 503 });
    cleanups.push(
      () => p.stop(),
      () => refusing.stop(),
    );
    const before = resources();
    const open = createNodeClient({ url: p.url, token: "t" });
    const waiting = createNodeClient({
      url: refusing.url,
      token: "t",
      backoff: { baseMs: 30_000, capMs: 30_000 },
    });
    const stream = open.open("session.control", {}).subscribe({ error: () => {} });
    await vi.waitFor(() => expect(open.state.name).toBe("open"));
    await vi.waitFor(() => expect(waiting.state.name).toBe("backoff"));
    expect(resources().length).toBeGreaterThan(before.length);
    await Promise.all([open.close(), waiting.close()]);
    stream.unsubscribe();
    const after = await settledResources(before);
    expect(noneAdded(before, after), `before ${before.join(",")} after ${after.join(",")}`).toBe(true);
  });
});

describe("client.close() while a browser-style socket is still connecting", () => {
  it("asks the host nothing over HTTP about the socket it cut", async () => {
    // accepts TCP and never answers: the socket stays connecting until the close cuts it
    const requests: string[] = [];
    const accepted: Socket[] = [];
    const server = createServer((socket) => {
      accepted.push(socket);
      socket.on("data", (data) => requests.push(String(data).split("\r\n")[0] ?? ""));
    });
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    cleanups.push(async () => {
      for (const s of accepted) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    });
    const { port } = server.address() as AddressInfo;
    const client = createClient({ url: `ws://127.0.0.1:${port}/api/remote.mux`, token: "t", WebSocket });
    await vi.waitFor(() => expect(requests).toHaveLength(1));
    expect(client.state.name).toBe("connecting");
    await client.close();
    expect(client.state.name).toBe("closed");
    // the upgrade request alone: no HTTP question (which, unanswered, held the close for 5 s)
    expect(requests).toEqual(["GET /api/remote.mux HTTP/1.1"]);
    expect(accepted).toHaveLength(1);
  });
});

describe("client.close() while a browser-style client asks the host why its socket was refused", () => {
  it("aborts the unanswered question at once and settles while the host still holds it", async () => {
    // refuses every upgrade (the socket closes before upgrading, so the client asks over HTTP) and
    // takes the HTTP question without ever answering it, as a slow or half-reachable host would
    const held: { request: IncomingMessage; response: ServerResponse }[] = [];
    let questionsCut = 0;
    const server = createHttpServer((request, response) => {
      held.push({ request, response });
      request.socket.on("close", () => questionsCut++);
    });
    server.on("upgrade", (_request, socket) => {
      socket.end("HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    });
    const port = await listenOnLoopback(server, cleanups);
    const before = resources();
    // passes every call through to the real fetch; kept only to see the question's signal
    const fetchSpy = vi.spyOn(globalThis, "fetch");
    const client = createClient({ url: `ws://127.0.0.1:${port}/api/remote.mux`, token: "t", WebSocket });
    await vi.waitFor(() => expect(held).toHaveLength(1), { timeout: 15_000 });
    expect(held[0]?.request.headers.authorization).toBe("Bearer t");
    expect(client.state.name).toBe("connecting");
    const question = fetchSpy.mock.calls[0]?.[1]?.signal;
    expect(question?.aborted).toBe(false);

    const closing = client.close();
    // before, the question ran on to its own 5 s limit and the close waited for it
    expect(question?.aborted).toBe(true);
    await closing;
    expect(client.state.name).toBe("closed");
    // the host never answered: only the abort let the close settle
    expect(held[0]?.response.headersSent).toBe(false);
    await vi.waitFor(() => expect(questionsCut).toBe(1), { timeout: 15_000 });
    expect(held).toHaveLength(1);
    const after = await settledResources(before);
    expect(noneAdded(before, after), `before ${before.join(",")} after ${after.join(",")}`).toBe(true);
  });
});
