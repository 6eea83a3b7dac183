import { once } from "node:events";
import type { AddressInfo, Socket } from "node:net";
import { type WebSocket, WebSocketServer } from "ws";
import type { SessionRow } from "../../protocol/index.js";
import { wsServerOptions } from "../harness/listen.js";
import { decode, encode } from "../harness/shared-codec.js";
import { RawSqlite } from "./raw-sqlite.js";

interface Pending {
  socket: WebSocket;
  id: number;
  sessionId: string;
  data: { title: string };
}

/**
 * The limit of acknowledged appends over the network: a bare `ws` server that answers the calls
 * `MuxCaller` sends (`{type:"call", id, params:{sessionId, data}}`) with one better-sqlite3
 * transaction per event-loop turn for every call that arrived in it (WAL, synchronous=FULL, as the
 * store), and acknowledges each after COMMIT. It sends the bytes sessionmux sends for a rename: the
 * caller's principal hears of the renamed session (protocol-v1 §6 `session.updated`, one row),
 * then the result, both corked into one write. No validation, principals or listeners; the row is
 * kept in memory only.
 */
export async function startRawWsAppend(dbPath: string): Promise<{ url: string; close(): Promise<void> }> {
  const db = new RawSqlite(dbPath);
  const heads = new Map<string, number>();
  const listRows = new Map<string, SessionRow>();
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
    const corked = new Set<Socket>();
    rows.forEach(({ sessionId, seq }, i) => {
      const p = batch[i]!;
      const tcp = (p.socket as unknown as { _socket: Socket })._socket;
      if (!corked.has(tcp)) {
        tcp.cork();
        corked.add(tcp);
      }
      const row = rowOf(sessionId, seq, p.data.title);
      p.socket.send(encode({ type: "event", name: "session.updated", value: { row } }));
      p.socket.send(encode({ type: "result", id: p.id, value: { seq } }));
    });
    for (const tcp of corked) tcp.uncork();
  };
  const rowOf = (sessionId: string, seq: number, title: string): SessionRow => {
    let row = listRows.get(sessionId);
    if (!row) {
      const at = Date.now();
      row = {
        sessionId,
        title,
        createdAt: at,
        updatedAt: at,
        lastPromptAt: null,
        turnCount: 0,
        blank: true,
        lastState: "idle",
        live: false,
        running: false,
        seq,
      };
      listRows.set(sessionId, row);
    }
    row.title = title;
    row.seq = seq;
    return row;
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
