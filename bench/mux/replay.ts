import Database from "better-sqlite3";
import { encodeFrame } from "../../protocol/codec.js";
import { decodeValue } from "../../src/store/event-codec.js";
import type { Clients } from "./clients-process.js";
import { deltas, fmt, freshDb, goal, newSession, rawWsServer, startBenchHost, TOKEN } from "./fixture.js";

/**
 * replay: cold replay of a 100k-event session, against a raw SQLite page read + ws send
 * (goal ≥ 0.7× events/s).
 */
const REPLAY_EVENTS = 100_000;

async function replaySessionmux(
  clients: Clients,
  dbPath: string,
): Promise<{ wall: number; exact: boolean; events: number }> {
  const builder = await startBenchHost(dbPath);
  let head = await newSession(builder, "replay");
  for (let done = 0; done < REPLAY_EVENTS; done += 1_000) {
    const outcome = await builder.store.append(
      "replay",
      deltas(1_000, (i) => `token ${done + i} of the replay`),
    );
    if (outcome.status === "appended") head = outcome.events[outcome.events.length - 1]?.seq ?? head;
  }
  await builder.close();
  const host = await startBenchHost(dbPath);
  try {
    clients.send({ op: "connect", url: host.wsUrl, token: TOKEN });
    await clients.reply("connected");
    const t0 = performance.now();
    clients.send({ op: "replay", sessionId: "replay", until: head });
    const reply = await clients.reply("done");
    return { wall: performance.now() - t0, exact: reply.exact === true, events: head };
  } finally {
    await host.close();
  }
}

/** The floor: page through the same table with better-sqlite3 and send each page as one frame. */
async function replayRaw(
  clients: Clients,
  dbPath: string,
  until: number,
): Promise<{ wall: number; exact: boolean }> {
  const db = new Database(dbPath, { readonly: true });
  const page = db.prepare(
    "SELECT seq, at, type, data FROM events WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT 500",
  );
  const raw = await rawWsServer();
  try {
    clients.send({ op: "raw", url: raw.url, sockets: 1, until });
    await clients.reply("ready");
    const socket = [...raw.server.clients][0];
    if (!socket) throw new Error("no raw client");
    const t0 = performance.now();
    let after = 0;
    for (;;) {
      const rows = page.all("replay", after) as { seq: number; at: number; type: string; data: Uint8Array }[];
      if (rows.length === 0) break;
      const events = rows.map((r) => ({ seq: r.seq, at: r.at, type: r.type, data: decodeValue(r.data) }));
      socket.send(encodeFrame({ type: "item", id: 1, value: { kind: "events", events } }));
      after = rows[rows.length - 1]?.seq ?? after;
      await new Promise((r) => setImmediate(r));
    }
    const reply = await clients.reply("done");
    return { wall: performance.now() - t0, exact: reply.exact === true };
  } finally {
    db.close();
    await raw.close();
  }
}

/** Runs the scenario and returns its report lines. */
export async function replayScenario(clients: Clients): Promise<string[]> {
  const dbPath = freshDb();
  const replay = await replaySessionmux(clients, dbPath);
  const rawReplay = await replayRaw(clients, dbPath, replay.events);
  const replayRate = replay.events / (replay.wall / 1000);
  const rawReplayRate = replay.events / (rawReplay.wall / 1000);
  return [
    `cold replay of ${fmt(replay.events)} events, one follower:`,
    `  sessionmux ${fmt(replayRate)} events/s (${fmt(replay.wall)} ms, exact ${replay.exact}); raw SQLite + ws ${fmt(rawReplayRate)} events/s (${fmt(rawReplay.wall)} ms, exact ${rawReplay.exact})`,
    `  ratio ${fmt(replayRate / rawReplayRate, 2)}×, goal ≥ 0.7× — ${goal(replayRate / rawReplayRate >= 0.7)}`,
  ];
}
