import { once } from "node:events";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { Server } from "socket.io";
import { LISTEN_BACKLOG } from "../harness/listen.js";
import type { FanoutSubject } from "../harness/subject.js";
import type { DeltaEvent } from "../harness/workload.js";

interface StoredEvent {
  seq: number;
  at: number;
  type: string;
  data: unknown;
}

const REPLAY_BATCH = 500;

/**
 * Socket.IO 4 doing sessionmux's job the way its documentation suggests: one room per session,
 * `connectionStateRecovery` to replay what a briefly disconnected follower missed, and a backlog
 * from memory for a follower that arrives with a cursor.
 */
export async function startSocketIo(): Promise<FanoutSubject> {
  const http = createServer();
  const io = new Server(http, {
    transports: ["websocket"],
    perMessageDeflate: false,
    connectionStateRecovery: { maxDisconnectionDuration: 120_000, skipMiddlewares: true },
  });
  const logs: StoredEvent[][] = [];
  const sessionIds: string[] = [];

  io.on("connection", (socket) => {
    socket.on("follow", (streams: { id: number; sessionId: string; afterSeq: number }[]) => {
      for (const stream of streams) {
        const log = logs[stream.id - 1];
        if (!log) continue;
        const missing = log.slice(stream.afterSeq);
        for (let i = 0; i < missing.length; i += REPLAY_BATCH)
          socket.emit("events", stream.id, missing.slice(i, i + REPLAY_BATCH));
        socket.join(stream.sessionId);
      }
    });
  });

  http.listen({ port: 0, host: "127.0.0.1", backlog: LISTEN_BACKLOG });
  await once(http, "listening");
  return {
    name: "Socket.IO 4",
    kind: "sio",
    url: `http://127.0.0.1:${(http.address() as AddressInfo).port}`,
    async prepare(ids) {
      for (const id of ids) {
        sessionIds.push(id);
        logs.push([]);
      }
    },
    async publish(index, events: readonly DeltaEvent[]) {
      const log = logs[index]!;
      const at = Date.now();
      const stored = events.map((e, i) => ({ seq: log.length + i + 1, at, type: e.type, data: e.data }));
      log.push(...stored);
      io.to(sessionIds[index]!).emit("events", index + 1, stored);
      return log.length;
    },
    async openSockets() {
      return io.engine.clientsCount;
    },
    async close() {
      io.disconnectSockets(true);
      await new Promise<void>((resolve) => io.close(() => resolve()));
      // The recovery adapter's purge timer is never cleared on close: it keeps the server alive,
      // with its packets and, through the connection handler, this peer's logs. Every scenario after
      // this one would then run its full collections over up to a million stale events.
      (io.of("/").adapter as unknown as { packets?: unknown[] }).packets = [];
      logs.length = 0;
    },
  };
}
