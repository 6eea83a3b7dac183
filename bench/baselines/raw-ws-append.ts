import { once } from "node:events";
import type { AddressInfo } from "node:net";
import { type WebSocket, WebSocketServer } from "ws";
import { wsServerOptions } from "../harness/listen.js";
import { decode, encode } from "../harness/shared-codec.js";
import { RawSqlite } from "./raw-sqlite.js";

interface Pending {
  socket: WebSocket;
  id: number;
  sessionId: string;
  data: unknown;
}

/**
 * The limit of acknowledged appends over the network: a bare `ws` server that answers the calls
 * `MuxCaller` sends (`{type:"call", id, params:{sessionId, data}}`) with one better-sqlite3
 * transaction per event-loop turn for every call that arrived in it (WAL, synchronous=FULL, as the
 * store), and acknowledges each after COMMIT. No validation, projection, principals or listeners.
 */
export async function startRawWsAppend(dbPath: string): Promise<{ url: string; close(): Promise<void> }> {
  const db = new RawSqlite(dbPath);
  const heads = new Map<string, number>();
  const server = new WebSocketServer(wsServerOptions);
  await once(server, "listening");
  let pending: Pending[] = [];
  const flush = () => {
    const batch = pending;
    pending = [];
    const rows = batch.map((p) => {
      const seq = (heads.get(p.sessionId) ?? 0) + 1;
      heads.set(p.sessionId, seq);
      return { sessionId: p.sessionId, seq, event: { type: "session/renamed", data: p.data } };
    });
    db.insertBatch(rows);
    rows.forEach((row, i) => {
      const p = batch[i]!;
      p.socket.send(encode({ type: "result", id: p.id, value: { seq: row.seq } }));
    });
  };
  server.on("connection", (socket) => {
    socket.on("message", (bytes: Buffer) => {
      const call = decode(bytes) as { id: number; params: { sessionId: string; title: string } };
      if (pending.length === 0) setImmediate(flush);
      pending.push({
        socket,
        id: call.id,
        sessionId: call.params.sessionId,
        data: { title: call.params.title },
      });
    });
  });
  return {
    url: `ws://127.0.0.1:${(server.address() as AddressInfo).port}`,
    async close() {
      for (const socket of server.clients) socket.terminate();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      db.close();
    },
  };
}
