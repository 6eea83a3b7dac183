import { once } from "node:events";
import type { AddressInfo } from "node:net";
import { describe, expect, it, vi } from "vitest";
import { type WebSocket, WebSocketServer } from "ws";
import { decodeFrame, encodeFrame } from "../../protocol/codec.js";
import type { SessionmuxError } from "../../protocol/errors.js";
import { SUBPROTOCOL } from "../../protocol/index.js";
import { createNodeClient } from "../../src/client/node.js";
import { cleanupsAfterEach } from "../support/cleanups.js";

const cleanups = cleanupsAfterEach();

/**
 * A `ws` server on 127.0.0.1 that accepts every upgrade and answers pings (as `ws` does) but says
 * nothing on the sockets `silent` picks; on the others it greets with `hello` and answers
 * `session.models`.
 */
async function helloWithholdingServer(silent: (connection: number) => boolean) {
  const wss = new WebSocketServer({
    host: "127.0.0.1",
    port: 0,
    perMessageDeflate: false,
    handleProtocols: (protocols) => (protocols.has(SUBPROTOCOL) ? SUBPROTOCOL : false),
  });
  await once(wss, "listening");
  const sockets: WebSocket[] = [];
  const closed: boolean[] = [];
  wss.on("connection", (socket) => {
    const index = sockets.push(socket) - 1;
    closed[index] = false;
    socket.on("close", () => (closed[index] = true));
    if (silent(index + 1)) return;
    socket.send(encodeFrame({ type: "hello", protocol: 1, hostId: "h", generation: "g", serverTime: 1 }));
    socket.on("message", (data) => {
      const frame = decodeFrame(new Uint8Array(data as Buffer)) as { type: string; id: number };
      if (frame.type === "call") {
        socket.send(encodeFrame({ type: "result", id: frame.id, value: { models: [], default: "demo" } }));
      }
    });
  });
  cleanups.push(async () => {
    for (const s of wss.clients) s.terminate();
    await new Promise<void>((resolve) => wss.close(() => resolve()));
  });
  const { port } = wss.address() as AddressInfo;
  return { url: `ws://127.0.0.1:${port}/api/remote.mux`, sockets, closed };
}

describe("a host that upgrades the socket but never says hello", () => {
  it("is dropped after the hello wait, reported as a timeout, and the client connects again; a call made meanwhile is answered on the next socket", async () => {
    const server = await helloWithholdingServer((n) => n === 1);
    const errors: SessionmuxError[] = [];
    const client = createNodeClient({
      url: server.url,
      token: "t",
      helloTimeoutMs: 250,
      backoff: { baseMs: 0, capMs: 0 },
      onError: (error) => errors.push(error),
    });
    cleanups.push(() => client.close());
    const states: string[] = [];
    const watching = client.state$.subscribe((s) => states.push(s.name));
    cleanups.push(() => watching.unsubscribe());

    const answer = client.call("session.models", {});
    // The silent socket answers the client's pings, so only the hello wait can end it.
    await vi.waitFor(() => expect(server.sockets).toHaveLength(2), { timeout: 5_000 });
    await expect(answer).resolves.toEqual({ models: [], default: "demo" });
    await vi.waitFor(() => expect(server.closed[0]).toBe(true));
    expect(states).toEqual(["connecting", "backoff", "connecting", "open"]);
    expect(errors.map((e) => e.code)).toEqual(["timeout"]);
    expect(errors[0]?.message).toContain(server.url);
  });

  it("with a hello in time, keeps the socket however long it then stays quiet", async () => {
    const server = await helloWithholdingServer(() => false);
    const client = createNodeClient({ url: server.url, token: "t", helloTimeoutMs: 150 });
    cleanups.push(() => client.close());
    await vi.waitFor(() => expect(client.state.name).toBe("open"));
    // several hello waits' worth of quiet: the wait ended with the hello
    for (let i = 0; i < 4; i += 1) await client.call("session.models", {});
    await new Promise((resolve) => setTimeout(resolve, 600));
    expect(client.state.name).toBe("open");
    expect(server.sockets).toHaveLength(1);
    expect(server.closed[0]).toBe(false);
  });
});
