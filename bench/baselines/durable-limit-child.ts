/**
 * The durable limit of agents streaming, in a process of its own so its CPU is its own: bare
 * better-sqlite3 (WAL, synchronous=FULL, the store's checkpoint interval) commits event `i` of
 * every session in one transaction (the best group commit concurrent agents could get), then a
 * bare `ws` server writes each committed event to the session's followers as one encoded frame,
 * the same bytes for each.
 * Nothing else: no projection, no listeners, no validation, no turn runner.
 */
import { once } from "node:events";
import type { AddressInfo } from "node:net";
import Database from "better-sqlite3";
import { type WebSocket, WebSocketServer } from "ws";
import { WAL_CHECKPOINT_PAGES } from "../../src/store/sqlite-store.js";
import { collectGarbage } from "../harness/gc.js";
import { wsServerOptions } from "../harness/listen.js";
import { decode, encode } from "../harness/shared-codec.js";
import { tempFolder } from "../harness/temp-folder.js";

export type LimitCommand =
  | { cmd: "prepare"; sessions: number; template: { type: string; data: unknown }[] }
  | { cmd: "run" }
  | { cmd: "cpu" }
  | { cmd: "close" };

export type LimitReply = { ok: true; url?: string; cpuMs?: number } | { ok: false; error: string };

const folder = tempFolder("durable-limit");
const db = new Database(folder.file("limit.db"));
db.pragma("journal_mode = WAL");
db.pragma("synchronous = FULL");
db.pragma(`wal_autocheckpoint = ${WAL_CHECKPOINT_PAGES}`);
db.exec(
  "CREATE TABLE events (session_id TEXT NOT NULL, seq INTEGER NOT NULL, type TEXT NOT NULL, " +
    "at INTEGER NOT NULL, data BLOB NOT NULL, PRIMARY KEY (session_id, seq)) WITHOUT ROWID",
);
const insert = db.prepare("INSERT INTO events (session_id, seq, type, at, data) VALUES (?, ?, ?, ?, ?)");
const server = new WebSocketServer(wsServerOptions);
const followers: Set<WebSocket>[] = [];
let template: { type: string; data: unknown }[] = [];
let runs = 0;
const cpuMs = () => {
  const used = process.cpuUsage();
  return (used.user + used.system) / 1000;
};

server.on("connection", (socket) => {
  socket.once("message", (data: Buffer) => {
    const { subscribe } = decode(data) as { subscribe: [number, number][] };
    for (const [id] of subscribe) followers[id - 1]?.add(socket);
    socket.on("close", () => {
      for (const set of followers) set.delete(socket);
    });
  });
});

/**
 * One transaction per event index across sessions, then the frames; yields between indexes.
 * Run `n` commits the template once more after the `n - 1` before it (seqs continue).
 */
async function run(base: number): Promise<void> {
  for (let i = 0; i < template.length; i++) {
    const event = template[i]!;
    const seq = base + i + 1;
    const at = Date.now();
    const data = encode(event.data);
    db.transaction(() => {
      for (let s = 0; s < followers.length; s++) insert.run(`s${s}`, seq, event.type, at, data);
    }).immediate();
    for (let s = 0; s < followers.length; s++) {
      const bytes = encode({
        type: "item",
        id: s + 1,
        value: { kind: "events", events: [{ seq, at, ...event }] },
      });
      for (const socket of followers[s]!) socket.send(bytes);
    }
    await new Promise((resolve) => setImmediate(resolve));
  }
}

process.on("message", async (message: { seq: number; command: LimitCommand }) => {
  const reply = (r: LimitReply) => process.send?.({ seq: message.seq, reply: r });
  try {
    const command = message.command;
    if (command.cmd === "prepare") {
      template = command.template;
      for (let s = 0; s < command.sessions; s++) followers.push(new Set());
      if (!server.address()) await once(server, "listening");
      reply({ ok: true, url: `ws://127.0.0.1:${(server.address() as AddressInfo).port}` });
    } else if (command.cmd === "run") {
      // the process's CPU so far: the run's is the difference at the next "cpu"
      collectGarbage();
      reply({ ok: true, cpuMs: cpuMs() });
      const base = runs * template.length;
      runs += 1;
      await run(base);
    } else if (command.cmd === "cpu") {
      reply({ ok: true, cpuMs: cpuMs() });
    } else {
      for (const socket of server.clients) socket.terminate();
      server.close();
      db.close();
      folder.remove();
      reply({ ok: true });
      process.exit(0);
    }
  } catch (error) {
    reply({ ok: false, error: error instanceof Error ? error.message : String(error) });
  }
});
