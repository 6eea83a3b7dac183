import { once } from "node:events";
import type { AddressInfo } from "node:net";
import { type WebSocket, WebSocketServer } from "ws";
import { wsServerOptions } from "../harness/listen.js";
import { decode, encode } from "../harness/shared-codec.js";
import type { FanoutSubject } from "../harness/subject.js";
import { tempFolder } from "../harness/temp-folder.js";
import type { DeltaEvent } from "../harness/workload.js";
import { RawSqlite } from "./raw-sqlite.js";

interface RawSession {
  sessionId: string;
  events: { seq: number; at: number; type: string; data: unknown }[];
  followers: Set<WebSocket>;
}

const REPLAY_BATCH = 500;

interface Publish {
  index: number;
  stored: RawSession["events"];
  resolve(seq: number): void;
}

/**
 * The physical limit of fanout: a bare `ws` server that keeps events in memory, encodes each batch
 * once and writes the same bytes to every follower, with a replay from memory on subscribe.
 */
export function startRawWs(): Promise<FanoutSubject> {
  return startRawWsServer(false);
}

/**
 * The durable limit of fanout: `startRawWs` that first commits every publish with bare
 * better-sqlite3 at the store's durability (WAL, `synchronous=FULL`), the publishes queued in one
 * tick in one transaction as a group commit would, and sends only after COMMIT.
 */
export function startDurableRawWs(): Promise<FanoutSubject> {
  return startRawWsServer(true);
}

async function startRawWsServer(durable: boolean): Promise<FanoutSubject> {
  const folder = durable ? tempFolder("raw-ws-sqlite") : undefined;
  const db = folder ? new RawSqlite(folder.file("raw.db")) : undefined;
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

  const deliver = (index: number, stored: RawSession["events"]) => {
    const bytes = frame(index, stored);
    for (const socket of sessions[index]!.followers) socket.send(bytes);
  };
  let pending: Publish[] = [];
  const commit = () => {
    const batch = pending;
    pending = [];
    db!.insertBatch(
      batch.flatMap(({ index, stored }) =>
        stored.map((e) => ({ sessionId: sessions[index]!.sessionId, seq: e.seq, event: e })),
      ),
    );
    for (const { index, stored, resolve } of batch) {
      deliver(index, stored);
      resolve(stored.at(-1)!.seq);
    }
  };

  return {
    name: durable ? "raw ws + better-sqlite3" : "raw ws",
    kind: "raw",
    url: `ws://127.0.0.1:${(server.address() as AddressInfo).port}`,
    async prepare(sessionIds) {
      for (const sessionId of sessionIds) sessions.push({ sessionId, events: [], followers: new Set() });
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
      if (!db) {
        deliver(index, stored);
        return session.events.length;
      }
      return new Promise<number>((resolve) => {
        if (pending.length === 0) setImmediate(commit);
        pending.push({ index, stored, resolve });
      });
    },
    async openSockets() {
      return server.clients.size;
    },
    async close() {
      for (const socket of server.clients) socket.terminate();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      // Terminated sockets keep their close handlers, and through them this log, until their
      // close events run: the next scenario's first collections would walk every event kept.
      sessions.length = 0;
      db?.close();
      folder?.remove();
    },
  };
}
