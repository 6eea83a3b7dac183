import { once } from "node:events";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, expect, it, vi } from "vitest";
import WebSocket, { WebSocketServer } from "ws";
import { encodeFrame } from "../../protocol/codec.js";
import { SUBPROTOCOL } from "../../protocol/index.js";
import { createClient, type SessionmuxClient } from "../../src/client/index.js";
import { createNodeClient } from "../../src/client/node.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { gate } from "../support/gate.js";

const cleanups = cleanupsAfterEach();

/**
 * A `ws` server on 127.0.0.1 that takes only `valid`, as a bearer header or a browser's `bearer.`
 * subprotocol, and holds each upgrade until `release` opens: the client's token can change while
 * its connect is in flight. Plain HTTP requests (a browser client's question about a refused
 * upgrade) are answered by the same rule.
 */
async function tokenCheckingServer(valid: string) {
  const release = gate();
  const offered: string[] = [];
  const tokenOf = (headers: Record<string, string | string[] | undefined>): string => {
    const bearer = /^Bearer (.+)$/.exec(String(headers.authorization ?? ""))?.[1];
    if (bearer !== undefined) return bearer;
    const entry = String(headers["sec-websocket-protocol"] ?? "")
      .split(",")
      .map((p) => p.trim())
      .find((p) => p.startsWith("bearer."));
    return entry ? Buffer.from(entry.slice("bearer.".length), "base64url").toString() : "";
  };
  // what the host answers a browser client's question over HTTP
  const http = createServer((req, res) => {
    res.statusCode = tokenOf(req.headers) === valid ? 426 : 401;
    res.end();
  });
  const wss = new WebSocketServer({
    server: http,
    perMessageDeflate: false,
    handleProtocols: (protocols) => (protocols.has(SUBPROTOCOL) ? SUBPROTOCOL : false),
    verifyClient: (info, done) => {
      const token = tokenOf(info.req.headers);
      offered.push(token);
      void release.promise.then(() => (token === valid ? done(true) : done(false, 401)));
    },
  });
  http.listen(0, "127.0.0.1");
  await once(http, "listening");
  wss.on("connection", (socket) => {
    socket.send(encodeFrame({ type: "hello", protocol: 1, hostId: "h", generation: "g", serverTime: 1 }));
  });
  cleanups.push(async () => {
    release.open();
    for (const s of wss.clients) s.terminate();
    await new Promise<void>((resolve) => wss.close(() => resolve()));
    http.closeAllConnections();
    await new Promise<void>((resolve) => http.close(() => resolve()));
  });
  const { port } = http.address() as AddressInfo;
  return { url: `ws://127.0.0.1:${port}/api/remote.mux`, release, offered };
}

async function refusedMidConnect(make: (url: string) => SessionmuxClient): Promise<void> {
  const server = await tokenCheckingServer("fresh");
  const client = make(server.url);
  cleanups.push(() => client.close());
  const states: string[] = [];
  const watching = client.state$.subscribe((s) => states.push(s.name));
  cleanups.push(() => watching.unsubscribe());
  await vi.waitFor(() => expect(server.offered).toEqual(["stale"]));
  // the new token comes while the stale one's connect is still in flight
  client.setToken("fresh");
  server.release.open();
  await vi.waitFor(() => expect(client.state.name).toBe("open"));
  expect(server.offered).toEqual(["stale", "fresh"]);
  expect(states).not.toContain("unauthorized");
}

describe("a token set while a connect with the old one is in flight", () => {
  it("is tried when the host refuses the old one, rather than waiting unauthorized for a token it already has (Node)", async () => {
    await refusedMidConnect((url) =>
      createNodeClient({ url, token: "stale", backoff: { baseMs: 0, capMs: 0 } }),
    );
  });

  it("is tried when the host refuses the old one, rather than waiting unauthorized for a token it already has (browser-style)", async () => {
    await refusedMidConnect((url) =>
      createClient({ url, token: "stale", WebSocket, backoff: { baseMs: 0, capMs: 0 } }),
    );
  });
});
