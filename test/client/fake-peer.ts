import { once } from "node:events";
import type { IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";
import { type WebSocket, WebSocketServer } from "ws";
import { decodeFrame, encodeFrame } from "../../protocol/codec.js";
import { SUBPROTOCOL } from "../../protocol/index.js";

export interface PeerConnection {
  readonly socket: WebSocket;
  readonly request: IncomingMessage;
  readonly received: Record<string, unknown>[];
  send(frame: Record<string, unknown>): void;
}

export interface FakePeerOptions {
  /** Answers a `call`; return undefined to leave it unanswered. */
  onCall?: (conn: PeerConnection, frame: { id: number; method: string; params: unknown }) => unknown;
  onOpen?: (conn: PeerConnection, frame: { id: number; method: string; params: unknown }) => void;
  /** HTTP status to refuse the upgrade with, per connection attempt (1-based); undefined accepts. */
  refuse?: (attempt: number) => number | undefined;
  generation?: () => string;
  /** The protocol version the `hello` names, per connection (1-based); 1 unless given. */
  protocol?: (connection: number) => number;
}

/**
 * A real `ws` server on 127.0.0.1:0 that speaks just enough of protocol v1 to drive the client's
 * fault scenarios: hello on connect, scripted answers, abrupt kills.
 */
export async function startFakePeer(options: FakePeerOptions = {}) {
  const connections: PeerConnection[] = [];
  let attempts = 0;
  const wss = new WebSocketServer({
    host: "127.0.0.1",
    port: 0,
    perMessageDeflate: false,
    handleProtocols: (protocols) => (protocols.has(SUBPROTOCOL) ? SUBPROTOCOL : false),
    verifyClient: (_info, done) => {
      attempts += 1;
      const status = options.refuse?.(attempts);
      if (status === undefined) done(true);
      else done(false, status);
    },
  });
  await once(wss, "listening");
  wss.on("connection", (socket, request) => {
    const conn: PeerConnection = {
      socket,
      request,
      received: [],
      send: (frame) => socket.send(encodeFrame(frame)),
    };
    connections.push(conn);
    conn.send({
      type: "hello",
      protocol: options.protocol?.(connections.length) ?? 1,
      hostId: "fake",
      generation: options.generation?.() ?? "g1",
      serverTime: Date.now(),
    });
    socket.on("message", (data) => {
      const frame = decodeFrame(new Uint8Array(data as Buffer)) as Record<string, unknown>;
      conn.received.push(frame);
      const f = frame as { type: string; id: number; method: string; params: unknown };
      if (f.type === "call") {
        const value = options.onCall?.(conn, f);
        if (value !== undefined) conn.send({ type: "result", id: f.id, value });
      } else if (f.type === "open") {
        options.onOpen?.(conn, f);
      } else if (f.type === "close") {
        conn.send({ type: "end", id: f.id });
      }
    });
  });
  const { port } = wss.address() as AddressInfo;
  return {
    port,
    url: `ws://127.0.0.1:${port}/api/remote.mux`,
    connections,
    get attempts() {
      return attempts;
    },
    /** The frames of one type the peer received, over all its connections, in order. */
    received(type: string): Record<string, unknown>[] {
      return connections.flatMap((c) => c.received).filter((f) => f.type === type);
    },
    /** Drops every socket without a close frame. */
    killAll() {
      for (const c of wss.clients) c.terminate();
    },
    async stop() {
      for (const c of wss.clients) c.terminate();
      await new Promise<void>((resolve) => wss.close(() => resolve()));
    },
  };
}
