import { once } from "node:events";
import type { AddressInfo } from "node:net";
import { WebSocketServer } from "ws";
import { wsServerOptions } from "../harness/listen.js";
import { decode, encode } from "../harness/shared-codec.js";
import { RawSqlite } from "./raw-sqlite.js";

const PAGE = 500;

/**
 * The limit of a cold replay over the network: a bare `ws` server that, on subscribe, reads the
 * session's rows from better-sqlite3 500 at a time and sends each page as one frame in the shape
 * every follower of the bench decodes (`{type:"item", id, value:{kind:"events", events}}`).
 */
export async function startRawWsReplay(
  dbPath: string,
  sessionId: string,
): Promise<{ url: string; close(): Promise<void> }> {
  const db = new RawSqlite(dbPath);
  const server = new WebSocketServer(wsServerOptions);
  await once(server, "listening");
  server.on("connection", (socket) => {
    socket.once("message", (bytes: Buffer) => {
      const { subscribe } = decode(bytes) as { subscribe: [number, number][] };
      for (const [id, afterSeq] of subscribe) {
        let after = afterSeq;
        for (;;) {
          const page = db.readPage(sessionId, after, PAGE);
          if (page.length === 0) break;
          socket.send(encode({ type: "item", id, value: { kind: "events", events: page } }));
          after = page.at(-1)!.seq;
        }
      }
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
