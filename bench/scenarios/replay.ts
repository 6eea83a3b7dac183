import { RawSqlite } from "../baselines/raw-sqlite.js";
import { startRawWsReplay } from "../baselines/raw-ws-replay.js";
import { Fleet } from "../harness/fleet.js";
import type { FleetConnect } from "../harness/fleet-protocol.js";
import type { Measurement, OpenSubject } from "../harness/rounds.js";
import { wallNow } from "../harness/stats.js";
import { tempFolder } from "../harness/temp-folder.js";
import { deltaEvent } from "../harness/workload.js";
import { DurableStreamsPeer } from "../peers/durable-streams.js";
import { BENCH_OWNER, BENCH_TOKEN, startSessionmux } from "./sessionmux-subject.js";

const PAGE = 500;
const SESSION = "bench-replay";
const rate = (count: number, ms: number) => (count * 1000) / ms;

/** A wall-timed replay of `count` events as a measurement that repeated runs can combine. */
const replayed = (count: number, ms: number, how: string, checked = false): Measurement => ({
  value: rate(count, ms),
  cpuMs: ms,
  count,
  detail: `${count.toLocaleString("en-US")} events ${how} in ${ms.toFixed(0)} ms${checked ? ", exact" : ""}`,
});

function* deltas(count: number) {
  for (let i = 0; i < count; i++) yield deltaEvent(i);
}

/** A raw better-sqlite3 file holding one session of `events` events, in a folder of its own. */
function rawReplayLog(prefix: string, events: number): { folder: { remove(): void }; path: string } {
  const folder = tempFolder(prefix);
  const path = folder.file("raw.db");
  const fill = new RawSqlite(path);
  const batch = [...deltas(1000)];
  for (let base = 0; base < events; base += 1000)
    fill.insertBatch(batch.map((event, i) => ({ sessionId: SESSION, seq: base + i + 1, event })));
  fill.close();
  return { folder, path };
}

/** Raw better-sqlite3, filled once: each `measure` opens the file and pages through it, 500 rows at a time. */
export async function openRawPageRead(events: number): Promise<OpenSubject> {
  const { folder, path } = rawReplayLog("raw-replay", events);
  return {
    async measure() {
      const db = new RawSqlite(path);
      try {
        const started = performance.now();
        let after = 0;
        for (;;) {
          const page = db.readPage(SESSION, after, PAGE);
          if (page.length === 0) break;
          after = page.at(-1)!.seq;
        }
        const elapsed = performance.now() - started;
        if (after !== events) throw new Error(`read ${after} of ${events}`);
        return replayed(events, elapsed, "read");
      } finally {
        db.close();
      }
    },
    close: async () => folder.remove(),
  };
}

/** Fills a sessionmux database with one session of `events` events; returns its path and head. */
export async function buildSessionmuxLog(
  events: number,
): Promise<{ dbPath: string; head: number; remove(): void }> {
  const { SqliteSessionStore } = await import("../../src/store/sqlite-store.js");
  const folder = tempFolder("replay");
  const dbPath = folder.file("sessions.db");
  const store = SqliteSessionStore.open(dbPath);
  await store.create({ sessionId: SESSION, owner: BENCH_OWNER, model: "demo" });
  let head = 0;
  const batch = [...deltas(1000)];
  for (let n = 0; n < events; n += 1000) {
    const outcome = await store.append(SESSION, batch);
    if (outcome.status !== "appended") throw new Error(`append: ${outcome.status}`);
    head = outcome.events.at(-1)!.seq;
  }
  await store.close();
  return { dbPath, head, remove: () => folder.remove() };
}

/** The store freshly opened (cold): `readAfter` pages of 500 until the head. */
export async function storeReplay(log: { dbPath: string; head: number }): Promise<Measurement> {
  const { SqliteSessionStore } = await import("../../src/store/sqlite-store.js");
  const store = SqliteSessionStore.open(log.dbPath);
  try {
    const started = performance.now();
    let after = 0;
    for (;;) {
      const outcome = await store.readAfter(SESSION, after, PAGE);
      if (outcome.status !== "ok") throw new Error(`readAfter: ${outcome.status}`);
      if (outcome.events.length === 0) break;
      after = outcome.events.at(-1)!.seq;
    }
    const elapsed = performance.now() - started;
    if (after !== log.head) throw new Error(`read ${after} of ${log.head}`);
    return replayed(log.head, elapsed, "from a cold store");
  } finally {
    await store.close();
  }
}

/** One follower of a fresh fleet connection reads a session from 0 to `head`; wall time in ms. */
async function followToHead(
  fleet: Fleet,
  connect: Pick<FleetConnect, "kind" | "url" | "token">,
  head: number,
): Promise<number> {
  await fleet.send({ cmd: "reset" });
  const started = wallNow();
  await fleet.send({
    ...connect,
    cmd: "connect",
    count: 1,
    streams: [{ id: 1, sessionId: SESSION, afterSeq: 0 }],
  });
  const done = await fleet.send({ cmd: "target", targets: [[1, head]], timeoutMs: 120_000 }, 150_000);
  const { stats } = await fleet.send({ cmd: "stats" });
  if (stats!.dup > 0 || stats!.gap > 0) throw new Error(`follower saw dup=${stats!.dup} gap=${stats!.gap}`);
  return done.at - started;
}

/**
 * Each `measure` starts a fresh host on the log (cold: nothing of it in the host's memory) and one
 * follower opens `session.follow` from 0 and reads to the head. The follower process is kept.
 */
export async function openWireReplay(log: { dbPath: string; head: number }): Promise<OpenSubject> {
  const fleet = Fleet.start();
  return {
    async measure() {
      const subject = await startSessionmux({ dbPath: log.dbPath });
      try {
        const ms = await followToHead(fleet, { kind: "mux", url: subject.url, token: BENCH_TOKEN }, log.head);
        return replayed(log.head, ms, "over the mux", true);
      } finally {
        await fleet.send({ cmd: "reset" });
        await subject.close();
      }
    },
    close: () => fleet.stop(),
  };
}

/** The Durable Streams reference, file-backed, filled once: a catch-up read of the whole stream. */
export async function openDurableStreamsReplay(events: number): Promise<OpenSubject> {
  const peer = await DurableStreamsPeer.start();
  try {
    const handle = await peer.create(SESSION);
    await peer.fill(handle, deltas(events));
  } catch (error) {
    await peer.close();
    throw error;
  }
  return {
    async measure() {
      const started = performance.now();
      const read = await peer.readAll(SESSION);
      const elapsed = performance.now() - started;
      if (read !== events) throw new Error(`read ${read} of ${events}`);
      return replayed(events, elapsed, "over HTTP");
    },
    close: () => peer.close(),
  };
}

/**
 * The limit over the network: raw SQLite pages sent over bare `ws` to the same follower. The
 * database is filled once; each `measure` opens it in a fresh server.
 */
export async function openRawWireReplay(events: number): Promise<OpenSubject> {
  const { folder, path } = rawReplayLog("raw-wire-replay", events);
  const fleet = Fleet.start();
  return {
    async measure() {
      const server = await startRawWsReplay(path, SESSION);
      try {
        const ms = await followToHead(fleet, { kind: "raw", url: server.url }, events);
        return replayed(events, ms, "over bare ws", true);
      } finally {
        await fleet.send({ cmd: "reset" });
        await server.close();
      }
    },
    async close() {
      await fleet.stop();
      folder.remove();
    },
  };
}
