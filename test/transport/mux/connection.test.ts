import { once } from "node:events";
import { connect as netConnect } from "node:net";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import WebSocket from "ws";
import { encodeFrame } from "../../../protocol/codec.js";
import { ADMIN_TOKEN, ALICE_TOKEN, startTestHost, type TestHost } from "../../support/host.js";
import { MuxPeer } from "../../support/mux-peer.js";
import { until } from "../../support/until.js";
import { upgradeRequest } from "../../support/upgrade-request.js";
import { connect, createSession } from "./mux-fixture.js";

/** The HTTP status of a refused upgrade. */
async function refusedStatus(ws: WebSocket): Promise<number> {
  const [, res] = (await once(ws, "unexpected-response")) as [
    unknown,
    { statusCode: number; destroy(): void },
  ];
  res.destroy();
  return res.statusCode;
}

/** Sends a raw HTTP request and resolves with the head of the host's answer. */
async function rawRequest(port: number, request: string): Promise<string> {
  const socket = netConnect(port, "127.0.0.1");
  await once(socket, "connect");
  let received = "";
  socket.on("error", () => {});
  const answered = new Promise<void>((resolve) => {
    socket.on("data", (c: Buffer) => {
      received += c.toString("latin1");
      if (received.includes("\r\n\r\n")) resolve();
    });
    socket.on("close", () => resolve());
  });
  socket.write(request);
  await answered;
  socket.destroy();
  return received;
}

const upgradeHead = (extra: string[]) => upgradeRequest([`Authorization: Bearer ${ADMIN_TOKEN}`, ...extra]);

describe("mux connection (protocol-v1 §2)", () => {
  let host: TestHost;
  beforeAll(async () => {
    host = await startTestHost();
  });
  afterAll(async () => {
    await host?.dispose();
  });

  it("sends hello first with hostId, generation and serverTime, and answers sessionmux.v1 only", async () => {
    const peer = await MuxPeer.connect(host.wsUrl, { subprotocolToken: ADMIN_TOKEN });
    expect(peer.ws.protocol).toBe("sessionmux.v1");
    expect(peer.hello).toMatchObject({
      type: "hello",
      protocol: 1,
      hostId: host.host.hostId,
      generation: host.host.generation,
    });
    expect(typeof peer.hello.serverTime).toBe("number");
    await peer.disconnect();
  });

  it("accepts the token as an Authorization header", async () => {
    const peer = await MuxPeer.connect(host.wsUrl, { token: ALICE_TOKEN });
    expect(peer.hello.type).toBe("hello");
    await peer.disconnect();
  });

  it.each([
    ["no token", {}],
    ["a wrong header token", { token: "wrong" }],
    ["a wrong subprotocol token", { subprotocolToken: "wrong" }],
    ["a garbled Authorization header", { headers: { authorization: "Basic abc" } }],
    [
      "the token in the URL query only",
      { path: `/api/remote.mux?token=${ADMIN_TOKEN}&access_token=${ADMIN_TOKEN}` },
    ],
  ])("refuses %s with 401 before any WebSocket exists", async (_name, options) => {
    const ws = MuxPeer.socket(host.wsUrl, options);
    expect(await refusedStatus(ws)).toBe(401);
  });

  it("refuses a foreign Origin with 403 and accepts the host's own", async () => {
    const foreign = MuxPeer.socket(host.wsUrl, {
      token: ADMIN_TOKEN,
      headers: { origin: "https://evil.example" },
    });
    expect(await refusedStatus(foreign)).toBe(403);
    const own = await MuxPeer.connect(host.wsUrl, { token: ADMIN_TOKEN, headers: { origin: host.url } });
    expect(own.hello.type).toBe("hello");
    await own.disconnect();
  });

  it("refuses an upgrade without the sessionmux.v1 subprotocol", async () => {
    const ws = MuxPeer.socket(host.wsUrl, { token: ADMIN_TOKEN, protocols: ["other.v2"] });
    expect(await refusedStatus(ws)).toBe(400);
  });

  it("answers an upgrade on another path with 404", async () => {
    const ws = MuxPeer.socket(host.wsUrl, { token: ADMIN_TOKEN, path: "/api/other" });
    expect(await refusedStatus(ws)).toBe(404);
  });

  it("CVE-2024-37890: an upgrade with 2,000 headers is answered and the host stays up", async () => {
    const headers = Array.from({ length: 2_000 }, (_, i) => `X-Filler-${i}: ${i}`);
    const answer = await rawRequest(host.port, upgradeHead(headers));
    // Node's header limit answers before ws sees the request
    expect(answer.split("\r\n")[0]).toBe("HTTP/1.1 431 Request Header Fields Too Large");
    const peer = await connect(host);
    expect(await peer.call("session.models")).toHaveProperty("models");
    await peer.disconnect();
  });

  it("CVE-2021-32640: a long crafted Sec-WebSocket-Protocol header is answered and the host stays up", async () => {
    const crafted = `sessionmux.v1${",".repeat(1)}${" ".repeat(6_000)}x`;
    const answer = await rawRequest(host.port, upgradeHead([`Sec-WebSocket-Protocol: ${crafted}`]));
    // the padding after a valid entry is skipped: the upgrade succeeds with sessionmux.v1 only
    expect(answer.split("\r\n")[0]).toBe("HTTP/1.1 101 Switching Protocols");
    expect(answer).toMatch(/\r\nSec-WebSocket-Protocol: sessionmux\.v1\r\n/i);
    const spaces = `b${" ".repeat(12_000)}`;
    const second = await rawRequest(host.port, upgradeHead([`Sec-WebSocket-Protocol: ${spaces}`]));
    // no sessionmux.v1 entry: refused by the upgrade gate (protocol-v1 §2)
    expect(second.split("\r\n")[0]).toBe("HTTP/1.1 400 Bad Request");
    const peer = await connect(host);
    expect(await peer.call("session.models")).toHaveProperty("models");
    await peer.disconnect();
  });

  it("closes with 1009 on a frame over maxPayload and keeps serving other sockets", async () => {
    const other = await connect(host);
    const peer = await connect(host);
    peer.sendRaw(new Uint8Array(1024 * 1024 + 1));
    expect((await peer.closed).code).toBe(1009);
    expect(await other.call("session.models")).toHaveProperty("models");
    await other.disconnect();
  });

  it("keeps the socket open with zero streams", async () => {
    const peer = await connect(host);
    const sessionId = await createSession(peer);
    const id = peer.follow(sessionId);
    await peer.waitItem(id, (i) => i.kind === "caughtUp");
    peer.close(id);
    expect((await peer.waitTerminal(id)).type).toBe("end");
    expect(await peer.call("session.models")).toHaveProperty("models");
    expect(peer.ws.readyState).toBe(WebSocket.OPEN);
    await peer.disconnect();
  });

  it("counts connections in metrics", async () => {
    const connections = async () => (await host.metrics.connections.get()).values[0]?.value ?? 0;
    const before = await connections();
    const peer = await connect(host);
    expect(await connections()).toBe(before + 1);
    await peer.disconnect();
    await vi.waitFor(async () => expect(await connections()).toBe(before), { timeout: 5_000 });
  });

  it("answers a client ping with a pong and keeps serving frames", async () => {
    const peer = await connect(host);
    peer.ws.ping();
    await once(peer.ws, "pong");
    peer.sendRaw(encodeFrame({ type: "call", id: 1, method: "session.models" }));
    await until(() => peer.of(1).length > 0);
    expect(peer.of(1)[0]?.type).toBe("result");
    await peer.disconnect();
  });
});

describe("mux heartbeat", () => {
  let host: TestHost;
  beforeAll(async () => {
    host = await startTestHost({ mux: { pingIntervalMs: 50 } });
  });
  afterAll(async () => {
    await host?.dispose();
  });

  it("terminates a peer that stops answering pings, and keeps one that answers", async () => {
    const silent = await MuxPeer.connect(host.wsUrl, { token: ADMIN_TOKEN, autoPong: false });
    const alive = await connect(host);
    const { code } = await silent.closed;
    expect(code).toBe(1006);
    expect(alive.ws.readyState).toBe(WebSocket.OPEN);
    expect(await alive.call("session.models")).toHaveProperty("models");
    await alive.disconnect();
  });

  it("keeps a peer whose pong came in while the host's event loop was stalled past two intervals", async () => {
    const peer = await connect(host);
    // the pong is written as the ping is read; the process then stalls six intervals, the pong
    // waiting in the host's socket while the heartbeat's timer comes due
    peer.ws.once("ping", () => {
      const until = performance.now() + 300;
      while (performance.now() < until) {
        // a stall of the whole process, host and peer alike
      }
    });
    await once(peer.ws, "ping");
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(peer.ws.readyState).toBe(WebSocket.OPEN);
    expect(await peer.call("session.models")).toHaveProperty("models");
    await peer.disconnect();
  });

  it("keeps a peer that never answers a ping but pings the host itself", async () => {
    // a slower clock than the suite's, so a stalled test process cannot pass for a silent peer
    const slow = await startTestHost({ mux: { pingIntervalMs: 200 } });
    const pinging = await MuxPeer.connect(slow.wsUrl, { token: ADMIN_TOKEN, autoPong: false });
    const timer = setInterval(() => pinging.ws.ping(), 20);
    try {
      // seven ping intervals: a silent peer is dropped within two
      await new Promise((resolve) => setTimeout(resolve, 1_400));
      expect(pinging.ws.readyState).toBe(WebSocket.OPEN);
      expect(await pinging.call("session.models")).toHaveProperty("models");
    } finally {
      clearInterval(timer);
      await pinging.disconnect();
      await slow.dispose();
    }
  });
});
