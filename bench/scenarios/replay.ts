import { RawSqlite } from "../baselines/raw-sqlite.js";
import { startRawWsReplay } from "../baselines/raw-ws-replay.js";
import { Fleet } from "../harness/fleet.js";
import { wallNow } from "../harness/stats.js";
import { tempFolder } from "../harness/temp-folder.js";
import { deltaEvent } from "../harness/workload.js";
import { DurableStreamsPeer } from "../peers/durable-streams.js";
import { BENCH_OWNER, BENCH_TOKEN, startSessionmux } from "./sessionmux-subject.js";

const PAGE = 500;
const SESSION = "bench-replay";
const rate = (count: number, ms: number) => (count * 1000) / ms;

function* deltas(count: number) {
  for (let i = 0; i < count; i++) yield deltaEvent(i);
}

/** Raw better-sqlite3: page through `events` rows 500 at a time, decoding each. */
export async function rawPageRead(events: number): Promise<{ value: number; detail: string }> {
  const folder = tempFolder("raw-replay");
  const db = new RawSqlite(folder.file("raw.db"));
  try {
    const batch = [...deltas(1000)];
    for (let base = 0; base < events; base += 1000)
      db.insertBatch(batch.map((event, i) => ({ sessionId: SESSION, seq: base + i + 1, event })));
    const started = performance.now();
    let after = 0;
    for (;;) {
      const page = db.readPage(SESSION, after, PAGE);
      if (page.length === 0) break;
      after = page.at(-1)!.seq;
    }
    const elapsed = performance.now() - started;
    if (after !== events) throw new Error(`read ${after} of ${events}`);
    return {
      value: rate(events, elapsed),
      detail: `${events.toLocaleString("en-US")} events in ${elapsed.toFixed(0)} ms`,
    };
  } finally {
    db.close();
    folder.remove();
  }
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
export async function storeReplay(log: {
  dbPath: string;
  head: number;
}): Promise<{ value: number; detail: string }> {
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
    return {
      value: rate(log.head, elapsed),
      detail: `${log.head.toLocaleString("en-US")} events, cold store`,
    };
  } finally {
    await store.close();
  }
}

/** A freshly started host; one follower opens `session.follow` from 0 and reads to the head. */
export async function wireReplay(log: {
  dbPath: string;
  head: number;
}): Promise<{ value: number; detail: string }> {
  const subject = await startSessionmux({ dbPath: log.dbPath });
  const fleet = await Fleet.start();
  try {
    // A first round trip proves the follower process has finished starting: its start-up is not replay time.
    await fleet.send({ cmd: "stats" });
    const started = wallNow();
    await fleet.send({
      cmd: "connect",
      kind: "mux",
      url: subject.url,
      token: BENCH_TOKEN,
      count: 1,
      streams: [{ id: 1, sessionId: SESSION, afterSeq: 0 }],
    });
    const done = await fleet.send({ cmd: "target", targets: [[1, log.head]], timeoutMs: 120_000 }, 150_000);
    const { stats } = await fleet.send({ cmd: "stats" });
    if (stats!.dup > 0 || stats!.gap > 0) throw new Error(`follower saw dup=${stats!.dup} gap=${stats!.gap}`);
    const elapsed = done.at - started;
    return {
      value: rate(log.head, elapsed),
      detail: `${log.head.toLocaleString("en-US")} events over the mux in ${elapsed.toFixed(0)} ms, exact`,
    };
  } finally {
    await fleet.stop();
    await subject.close();
  }
}

/** The Durable Streams reference, file-backed: a catch-up read of the whole stream with its client. */
export async function durableStreamsReplay(events: number): Promise<{ value: number; detail: string }> {
  const peer = await DurableStreamsPeer.start();
  try {
    const handle = await peer.create(SESSION);
    await peer.fill(handle, deltas(events));
    const started = performance.now();
    const read = await peer.readAll(SESSION);
    const elapsed = performance.now() - started;
    if (read !== events) throw new Error(`read ${read} of ${events}`);
    return {
      value: rate(events, elapsed),
      detail: `${events.toLocaleString("en-US")} events over HTTP in ${elapsed.toFixed(0)} ms`,
    };
  } finally {
    await peer.close();
  }
}

/** The limit over the network: raw SQLite pages sent over bare `ws` to the same follower. */
export async function rawWireReplay(events: number): Promise<{ value: number; detail: string }> {
  const folder = tempFolder("raw-wire-replay");
  const path = folder.file("raw.db");
  const db = new RawSqlite(path);
  const batch = [...deltas(1000)];
  for (let base = 0; base < events; base += 1000)
    db.insertBatch(batch.map((event, i) => ({ sessionId: SESSION, seq: base + i + 1, event })));
  db.close();
  const server = await startRawWsReplay(path, SESSION);
  const fleet = await Fleet.start();
  try {
    await fleet.send({ cmd: "stats" });
    const started = wallNow();
    await fleet.send({
      cmd: "connect",
      kind: "raw",
      url: server.url,
      count: 1,
      streams: [{ id: 1, sessionId: SESSION, afterSeq: 0 }],
    });
    const done = await fleet.send({ cmd: "target", targets: [[1, events]], timeoutMs: 120_000 }, 150_000);
    const { stats } = await fleet.send({ cmd: "stats" });
    if (stats!.dup > 0 || stats!.gap > 0) throw new Error(`follower saw dup=${stats!.dup} gap=${stats!.gap}`);
    const elapsed = done.at - started;
    return {
      value: rate(events, elapsed),
      detail: `${events.toLocaleString("en-US")} events over bare ws in ${elapsed.toFixed(0)} ms, exact`,
    };
  } finally {
    await fleet.stop();
    await server.close();
    folder.remove();
  }
}
