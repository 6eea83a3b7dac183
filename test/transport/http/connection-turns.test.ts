import { once } from "node:events";
import { createServer, type ServerResponse } from "node:http";
import { type AddressInfo, connect, type Socket } from "node:net";
import { describe, expect, it } from "vitest";
import { awaitTurn } from "../../../src/transport/http/connection-turns.js";
import { cleanupsAfterEach } from "../../support/cleanups.js";
import { until } from "../../support/until.js";

/**
 * A connection's turns, on a real HTTP server on 127.0.0.1 whose handler takes each request's
 * turn first, and a raw TCP peer that pipelines requests: `/hold…` answers wait until the test
 * ends them, `/app…` answers are an app's own (no turn taken), any other answers its path.
 */

const cleanups = cleanupsAfterEach();
const MIB = 1024 * 1024;

async function serve(options: { highWaterBytes?: number; maxWaiting?: number } = {}) {
  const parsed: string[] = [];
  const handled: string[] = [];
  const held = new Map<string, ServerResponse>();
  const turns = new Map<string, Promise<boolean>>();
  const sockets: Socket[] = [];
  let idleListeners: { drain: number; close: number } | undefined;
  const server = createServer((req, res) => {
    const path = req.url ?? "";
    parsed.push(path);
    if (!sockets.includes(req.socket)) sockets.push(req.socket);
    if (path.startsWith("/app")) return void res.end(Buffer.alloc(32 * MIB, 0x61));
    const turn = awaitTurn(req, res, options.highWaterBytes ?? 64 * 1024, options.maxWaiting);
    turns.set(path, turn);
    void turn.then((mine) => {
      if (!mine) return;
      handled.push(path);
      if (path.startsWith("/hold")) held.set(path, res);
      else res.end(path);
    });
  });
  // after the server's own: what an idle connection carries
  server.on("connection", (socket: Socket) => {
    idleListeners = { drain: socket.listenerCount("drain"), close: socket.listenerCount("close") };
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  cleanups.push(() => {
    server.closeAllConnections();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });
  const { port } = server.address() as AddressInfo;
  const peer = connect(port, "127.0.0.1");
  cleanups.push(() => void peer.destroy());
  peer.on("error", () => {});
  await once(peer, "connect");
  let received = "";
  peer.on("data", (chunk: Buffer) => {
    received += chunk.toString("latin1");
  });
  let closed = false;
  peer.once("close", () => {
    closed = true;
  });
  const send = (...paths: string[]) =>
    peer.write(paths.map((p) => `GET ${p} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`).join(""));
  return {
    parsed,
    handled,
    held,
    turns,
    peer,
    send,
    closed: () => closed,
    /** The bodies answered so far, in the order they arrived. */
    bodies: () => [...received.matchAll(/\r\n\r\n(\/[a-z0-9]+)/g)].map((m) => m[1]),
    serverSocket: () => sockets[0]!,
    /** The server socket's 'drain' and 'close' listeners when it was new. */
    idleListeners: () => idleListeners,
  };
}

describe("a connection's turns", () => {
  it("a pipelined request is handled only once the answer before it is done, and the answers come in order", async () => {
    const c = await serve();
    c.send("/hold1", "/a", "/b");
    await until(() => c.parsed.length === 3, 5_000, "three requests parsed");
    expect(c.handled).toEqual(["/hold1"]);
    c.held.get("/hold1")!.end("/hold1");
    await until(() => c.handled.length === 3, 5_000, "the two behind it handled");
    expect(c.handled).toEqual(["/hold1", "/a", "/b"]);
    await until(() => c.bodies().length === 3, 5_000, "three answers read");
    expect(c.bodies()).toEqual(["/hold1", "/a", "/b"]);
  });

  it("lets maxWaiting requests wait their turn; one more closes the connection and is never handled", async () => {
    const c = await serve({ maxWaiting: 2 });
    c.send("/hold1", "/a", "/b");
    await until(() => c.parsed.length === 3, 5_000, "three requests parsed");
    // the one being answered does not wait: two wait, as many as allowed
    expect(c.serverSocket().destroyed).toBe(false);
    c.send("/c");
    await until(() => c.closed(), 5_000, "the connection closed");
    expect(c.parsed).toEqual(["/hold1", "/a", "/b", "/c"]);
    expect(await c.turns.get("/c")).toBe(false);
    // the ones before it keep their places: the next takes its turn once the held answer is gone
    await until(() => c.handled.length >= 2, 5_000, "the next request's turn");
    expect(c.handled.slice(0, 2)).toEqual(["/hold1", "/a"]);
    expect(c.handled).not.toContain("/c");
  });

  it("a request that takes its turn no longer counts as waiting", async () => {
    const c = await serve({ maxWaiting: 2 });
    c.send("/hold1", "/hold2", "/a");
    await until(() => c.parsed.length === 3, 5_000, "three requests parsed");
    c.held.get("/hold1")!.end("/hold1");
    await until(() => c.handled.includes("/hold2"), 5_000, "the second request's turn");
    // waiting now: /a, then /b: two, as many as allowed
    c.send("/b");
    await until(() => c.parsed.length === 4, 5_000, "the fourth request parsed");
    expect(c.serverSocket().destroyed).toBe(false);
    // a third waiting is one too many
    c.send("/c");
    await until(() => c.closed(), 5_000, "the connection closed");
    expect(await c.turns.get("/c")).toBe(false);
    expect(c.handled).not.toContain("/c");
  });

  it("a request on a connection with nothing unsent is handled at once, even at a high-water mark of 0", async () => {
    const c = await serve({ highWaterBytes: 0 });
    c.send("/a");
    await until(() => c.bodies().length === 1, 5_000, "the answer read");
    expect(c.handled).toEqual(["/a"]);
  });

  it("a request waiting for the app's answer to drain gets its turn once the peer reads it, and leaves no listener behind", async () => {
    const c = await serve();
    c.peer.pause();
    c.send("/app", "/a");
    await until(() => c.parsed.length === 2, 5_000, "both requests parsed");
    expect(c.serverSocket().writableLength).toBeGreaterThan(64 * 1024);
    expect(c.handled).toEqual([]);
    c.peer.resume();
    expect(await c.turns.get("/a")).toBe(true);
    await until(() => c.bodies().includes("/a"), 10_000, "the answer behind the app's read");
    const socket = c.serverSocket();
    expect({ drain: socket.listenerCount("drain"), close: socket.listenerCount("close") }).toEqual(
      c.idleListeners(),
    );
  });

  it("a request waiting for the app's answer to drain gets its turn when the peer resets the connection, without failing", async () => {
    const c = await serve();
    // the peer reads nothing: most of the app's answer stays in the server's socket
    c.peer.pause();
    c.send("/app", "/a");
    await until(() => c.parsed.length === 2, 5_000, "both requests parsed");
    expect(c.serverSocket().writableLength).toBeGreaterThan(64 * 1024);
    let settled = false;
    const turn = c.turns.get("/a")!.then((mine) => {
      settled = true;
      return mine;
    });
    expect(c.handled).toEqual([]);
    expect(settled).toBe(false);
    // the peer goes with unread bytes: the server's socket sees a reset ('error', then 'close')
    c.peer.resetAndDestroy();
    await expect(turn).resolves.toBe(true);
    expect(settled).toBe(true);
    expect(c.serverSocket().destroyed).toBe(true);
  });
});
