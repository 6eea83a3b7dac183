import { once } from "node:events";
import { createServer, type IncomingMessage, type Server } from "node:http";
import { type AddressInfo, connect as netConnect } from "node:net";
import { Duplex } from "node:stream";
import { describe, expect, it, vi } from "vitest";
import WebSocket from "ws";
import { SUBPROTOCOL } from "../../../protocol/index.js";
import { DemoAgent } from "../../../src/agents/demo-agent.js";
import { SessionHost } from "../../../src/host/session-host.js";
import { SqliteSessionStore } from "../../../src/store/sqlite-store.js";
import { Authenticator } from "../../../src/transport/auth.js";
import { HostMetrics } from "../../../src/transport/metrics.js";
import {
  createMuxUpgradeHandler,
  type MuxOptionsInput,
  type MuxUpgradeHandler,
} from "../../../src/transport/mux/mux-server.js";
import { PrincipalLimits } from "../../../src/transport/principal-limits.js";
import { cleanupsAfterEach } from "../../support/cleanups.js";
import { MuxPeer } from "../../support/mux-peer.js";
import { tempDir } from "../../support/temp-dir.js";
import { upgradeRequest, upgradeRequestHead } from "../../support/upgrade-request.js";

/**
 * The mux's upgrade handling on its own (no `startHost` around it): what it counts, what it
 * refuses on the raw socket and how it lets go of its sockets at shutdown.
 */

const cleanups = cleanupsAfterEach();
const ALICE_TOKEN = "alice-mux-server";
const ALICE = { name: "alice", admin: false };

interface MuxUnderTest {
  mux: MuxUpgradeHandler;
  port: number;
  wsUrl: string;
}

/** A real host on a SQLite file and the mux handed every upgrade of an HTTP server on loopback. */
async function startMux(options: MuxOptionsInput & { metrics?: HostMetrics } = {}): Promise<MuxUnderTest> {
  const dir = tempDir();
  const store = SqliteSessionStore.open(dir.file("sessions.db"));
  const host = new SessionHost({ store, agent: new DemoAgent() });
  await host.start();
  const auth = new Authenticator([{ name: "alice", secret: ALICE_TOKEN, admin: false }]);
  const mux = createMuxUpgradeHandler(host, auth, { logger: { error: () => {} }, ...options });
  const server: Server = createServer();
  server.on("upgrade", (req, socket, head) => mux.handleUpgrade(req, socket, head));
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  cleanups.push(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
    await mux.close();
    await host.shutdown();
    await store.close();
    dir.remove();
  });
  const { port } = server.address() as AddressInfo;
  return { mux, port, wsUrl: `ws://127.0.0.1:${port}/api/remote.mux` };
}

/** Errors thrown where no caller catches them (a socket's event listener) until the test ends. */
function uncaughtErrors(): unknown[] {
  const thrown: unknown[] = [];
  const record = (err: unknown) => thrown.push(err);
  process.on("uncaughtException", record);
  cleanups.push(() => void process.off("uncaughtException", record));
  return thrown;
}

async function connectPeer(wsUrl: string): Promise<MuxPeer> {
  const peer = await MuxPeer.connect(wsUrl, { token: ALICE_TOKEN });
  cleanups.push(() => peer.disconnect());
  return peer;
}

const upgradeHeaders = [`Sec-WebSocket-Protocol: ${SUBPROTOCOL}`, `Authorization: Bearer ${ALICE_TOKEN}`];

/** An upgrade over raw TCP; resolves with everything the host sent until it closed the socket. */
async function rawUpgrade(port: number): Promise<string> {
  const socket = netConnect(port, "127.0.0.1");
  socket.on("error", () => {});
  let received = "";
  socket.on("data", (chunk: Buffer) => {
    received += chunk.toString("latin1");
  });
  socket.write(upgradeRequest(upgradeHeaders));
  await once(socket, "close");
  return received;
}

/**
 * The status line of an upgrade the host took, then the code and reason of the close frame it
 * sent first (one frame, unmasked, short enough for a one-byte length), and whether more followed.
 */
function closedAtOnce(answer: string): { status: string; code: number; reason: unknown; more: boolean } {
  const at = answer.indexOf("\r\n\r\n");
  const frame = Buffer.from(answer.slice(at + 4), "latin1");
  const length = frame[1]! & 0x7f;
  return {
    status: answer.slice(0, answer.indexOf("\r\n")),
    code: frame[0] === 0x88 ? frame.readUInt16BE(2) : -1,
    reason: JSON.parse(frame.subarray(4, 2 + length).toString()),
    more: frame.length > 2 + length,
  };
}

/** The status line and JSON body of a refusal the host answered on the raw socket. */
function refusal(answer: string): { status: string; body: unknown } {
  const [head = "", body = ""] = answer.split("\r\n\r\n");
  return { status: head.split("\r\n")[0] ?? "", body: JSON.parse(body) };
}

describe("the mux upgrade handler", () => {
  it("counts its connections until each socket closes, with no metrics to report to", async () => {
    const thrown = uncaughtErrors();
    const { mux, wsUrl } = await startMux();
    expect(mux.connections).toBe(0);
    const first = await connectPeer(wsUrl);
    const second = await connectPeer(wsUrl);
    expect(mux.connections).toBe(2);
    await first.disconnect();
    await vi.waitFor(() => expect(mux.connections).toBe(1), { timeout: 5_000 });
    expect(await second.call("session.models")).toHaveProperty("models");
    await second.disconnect();
    await vi.waitFor(() => expect(mux.connections).toBe(0), { timeout: 5_000 });
    expect(thrown).toEqual([]);
  });

  it("turns a principal's socket past its limit away with close code 4429 naming the limit, before any hello and holding no slot, and takes one again once a socket closed", async () => {
    const metrics = new HostMetrics();
    const { mux, wsUrl, port } = await startMux({
      principalLimits: new PrincipalLimits({ maxSocketsPerPrincipal: 2 }),
      metrics,
    });
    const first = await connectPeer(wsUrl);
    await connectPeer(wsUrl);
    // a browser hides a refused upgrade's HTTP status, but reads a close code and its reason;
    // the raw peer never answers the close, and the host cuts it all the same
    expect(closedAtOnce(await rawUpgrade(port))).toEqual({
      status: "HTTP/1.1 101 Switching Protocols",
      code: 4429,
      reason: { error: "too_many_connections", message: "at most 2 sockets per principal; close one first" },
      more: false,
    });
    expect(mux.connections).toBe(2);
    // counted where an operator looks for refusals
    expect(await metrics.registry.getSingleMetricAsString("sessionmux_refused_total")).toContain(
      'sessionmux_refused_total{code="too_many_connections"} 1',
    );
    await first.disconnect();
    const third = await vi.waitFor(() => connectPeer(wsUrl), { timeout: 5_000 });
    expect(await third.call("session.models")).toHaveProperty("models");
  });

  it("once closed, refuses an upgrade with 404 on the raw socket", async () => {
    const { mux, port } = await startMux();
    await mux.close();
    expect(refusal(await rawUpgrade(port))).toEqual({
      status: "HTTP/1.1 404 Not Found",
      body: { error: "not_found", message: "shutting down" },
    });
  });

  it("negotiates no compression with a client that offers it", async () => {
    const { wsUrl } = await startMux();
    // `ws` clients offer permessage-deflate unless told not to
    const ws = new WebSocket(wsUrl, [SUBPROTOCOL], {
      headers: { authorization: `Bearer ${ALICE_TOKEN}` },
    });
    cleanups.push(() => ws.terminate());
    await once(ws, "open");
    expect(ws.protocol).toBe(SUBPROTOCOL);
    expect(ws.extensions).toBe("");
  });

  it("closes a socket 1001 with its reason at shutdown, and counts it gone once close resolves", async () => {
    const { mux, wsUrl } = await startMux();
    const peer = await connectPeer(wsUrl);
    await mux.close();
    expect(mux.connections).toBe(0);
    expect(await peer.closed).toEqual({ code: 1001, reason: "host shutting down" });
  });

  it("asked to close again while closing, resolves once every socket is gone, ending each stream once", async () => {
    const { mux, wsUrl } = await startMux();
    const peer = await connectPeer(wsUrl);
    const { header } = await peer.call<{ header: { sessionId: string } }>("session.create", {});
    const id = peer.follow(header.sessionId);
    await peer.waitItem(id, (item) => item.kind === "caughtUp");
    const first = mux.close();
    await mux.close();
    expect(mux.connections).toBe(0);
    await first;
    await peer.closed;
    expect(peer.of(id).filter((frame) => frame.type !== "item")).toEqual([
      expect.objectContaining({
        type: "error",
        error: expect.objectContaining({ code: "host_shutting_down" }),
      }),
    ]);
  });

  it("cuts a peer that never answers the close handshake instead of waiting for it", async () => {
    const { mux, port } = await startMux();
    // upgraded, then silent: it reads what the host sends but sends no close frame back
    const socket = netConnect(port, "127.0.0.1");
    socket.on("error", () => {});
    let received = "";
    socket.on("data", (chunk: Buffer) => {
      received += chunk.toString("latin1");
    });
    cleanups.push(() => void socket.destroy());
    socket.write(upgradeRequest(upgradeHeaders));
    await vi.waitFor(() => expect(received).toContain("101 Switching Protocols"), { timeout: 5_000 });
    await vi.waitFor(() => expect(mux.connections).toBe(1), { timeout: 5_000 });
    let closedByHost = false;
    socket.on("close", () => {
      closedByHost = true;
    });
    // the mux's grace passes on a clock of the test's; `ws`'s own wait for the close frame (30 s)
    // never does
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    let closing: Promise<void>;
    try {
      closing = mux.close();
      await vi.advanceTimersByTimeAsync(1_000);
    } finally {
      vi.useRealTimers();
    }
    await vi.waitFor(() => expect(closedByHost).toBe(true), { timeout: 5_000 });
    await closing;
    expect(mux.connections).toBe(0);
  });
});

/** A socket an upgrade never reaches the network from: what the mux wrote, one entry per write. */
class RecordingSocket extends Duplex {
  readonly writes: Buffer[] = [];

  override _read(): void {}

  override _write(chunk: Buffer, _encoding: BufferEncoding, done: () => void): void {
    this.writes.push(chunk);
    done();
  }

  override _writev(chunks: { chunk: Buffer }[], done: () => void): void {
    this.writes.push(Buffer.concat(chunks.map((c) => c.chunk)));
    done();
  }
}

/** The request `http` would hand over for that upgrade. */
function upgradeMessage(): IncomingMessage {
  const headers: Record<string, string> = {};
  for (const line of upgradeRequestHead(upgradeHeaders).slice(1)) {
    const colon = line.indexOf(":");
    headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim();
  }
  return { method: "GET", url: "/api/remote.mux", headers } as unknown as IncomingMessage;
}

describe("the sockets handed to the mux", () => {
  it("writes the 101 answer and the hello in one write", async () => {
    const { mux } = await startMux();
    const socket = new RecordingSocket();
    mux.admit(ALICE, upgradeMessage(), socket, Buffer.alloc(0));
    await vi.waitFor(() => expect(socket.writes.length).toBeGreaterThan(0), { timeout: 5_000 });
    const first = socket.writes[0]!.toString("latin1");
    expect(first).toMatch(/^HTTP\/1\.1 101 Switching Protocols\r\n/);
    expect(first).toContain("hello");
    socket.destroy();
  });

  it.each([
    [
      "refused by handleUpgrade",
      (mux: MuxUpgradeHandler, socket: Duplex) => {
        const req = upgradeMessage();
        req.headers.authorization = "Bearer wrong";
        mux.handleUpgrade(req, socket, Buffer.alloc(0));
      },
    ],
    [
      "refused by admit",
      async (mux: MuxUpgradeHandler, socket: Duplex) => {
        await mux.close();
        mux.admit(ALICE, upgradeMessage(), socket, Buffer.alloc(0));
      },
    ],
  ])("destroys a socket %s that reports an error, which reaches no one else", async (_, handOver) => {
    const { mux } = await startMux();
    // the answer never leaves: the error comes while the host is still writing it
    const socket = new (class extends RecordingSocket {
      override _write(): void {}
      override _writev(): void {}
    })();
    await handOver(mux, socket);
    socket.emit("error", new Error("read ECONNRESET"));
    expect(socket.destroyed).toBe(true);
  });

  it("lets go of a refused socket only once its answer is written", async () => {
    const { mux } = await startMux();
    await mux.close();
    // a network socket whose send buffer is full takes a write only later
    const socket = new (class extends RecordingSocket {
      override _write(chunk: Buffer, _encoding: BufferEncoding, done: () => void): void {
        setImmediate(() => super._write(chunk, _encoding, done));
      }
    })();
    const seen: string[] = [];
    socket.on("finish", () => seen.push("finish"));
    socket.on("close", () => seen.push("close"));
    mux.admit(ALICE, upgradeMessage(), socket, Buffer.alloc(0));
    await once(socket, "close");
    expect(seen).toEqual(["finish", "close"]);
    expect(refusal(Buffer.concat(socket.writes).toString("latin1")).status).toBe("HTTP/1.1 404 Not Found");
  });
});
