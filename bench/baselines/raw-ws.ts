import { once } from "node:events";
import type { AddressInfo } from "node:net";
import { decode, encode } from "@msgpack/msgpack";
import { type WebSocket, WebSocketServer } from "ws";
import { wsServerOptions } from "../harness/listen.js";
import type { FanoutSubject } from "../harness/subject.js";
import type { DeltaEvent } from "../harness/workload.js";

interface RawSession {
  events: { seq: number; at: number; type: string; data: unknown }[];
  followers: Set<WebSocket>;
}

const REPLAY_BATCH = 500;

/**
 * The physical limit of fanout: a bare `ws` server that keeps events in memory, encodes each batch
 * once and writes the same bytes to every follower, with a replay from memory on subscribe.
 */
export async function startRawWs(): Promise<FanoutSubject> {
  const server = new WebSocketServer(wsServerOptions);
  await once(server, "listening");
  const sessions: RawSession[] = [];
  const frame = (index: number, events: RawSession["events"]) =>
    encode({ type: "item", id: index + 1, value: { kind: "events", events } });

  server.on("connection", (socket) => {
    socket.once("message", (data: Buffer) => {
      const { subscribe } = decode(data) as { subscribe: [number, number][] };
      for (const [id, afterSeq] of subscribe) {
        const session = sessions[id - 1];
        if (!session) continue;
        const missing = session.events.slice(afterSeq);
        for (let i = 0; i < missing.length; i += REPLAY_BATCH)
          socket.send(frame(id - 1, missing.slice(i, i + REPLAY_BATCH)));
        session.followers.add(socket);
      }
      socket.on("close", () => {
        for (const session of sessions) session.followers.delete(socket);
      });
    });
  });

  return {
    name: "raw ws",
    kind: "raw",
    url: `ws://127.0.0.1:${(server.address() as AddressInfo).port}`,
    async prepare(ids) {
      for (let i = 0; i < ids.length; i++) sessions.push({ events: [], followers: new Set() });
    },
    async publish(index, events: readonly DeltaEvent[]) {
      const session = sessions[index]!;
      const at = Date.now();
      const stored = events.map((e, i) => ({
        seq: session.events.length + i + 1,
        at,
        type: e.type,
        data: e.data,
      }));
      session.events.push(...stored);
      const bytes = frame(index, stored);
      for (const socket of session.followers) socket.send(bytes);
      return session.events.length;
    },
    async openSockets() {
      return server.clients.size;
    },
    async close() {
      for (const socket of server.clients) socket.terminate();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
