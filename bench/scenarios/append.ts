import { RawSqlite } from "../baselines/raw-sqlite.js";
import { startRawWsAppend } from "../baselines/raw-ws-append.js";
import { MuxCaller } from "../harness/mux-caller.js";
import type { Measurement, OpenSubject } from "../harness/rounds.js";
import { tempFolder } from "../harness/temp-folder.js";
import { type AppendShape, timedAppends, timedWriters } from "../harness/timed-writers.js";
import { deltaEvent, sessionIds } from "../harness/workload.js";
import type { DurableStreamsPeer } from "../peers/durable-streams.js";
import { BENCH_OWNER, BENCH_TOKEN, startSessionmux, writerName, writerToken } from "./sessionmux-subject.js";

/** A wall-timed batch of `count` appends as a measurement that repeated runs can combine. */
const appended = (count: number, ms: number, detail: string): Measurement => ({
  value: (count * 1000) / ms,
  cpuMs: ms,
  count,
  detail,
});

/**
 * Raw better-sqlite3: the writers' rows in batches of one row per writer, one transaction each.
 * The file is opened once; each `measure` adds `appendsPerWriter` rows per writer.
 */
export async function openRawBatchedInsert(shape: AppendShape): Promise<OpenSubject> {
  const folder = tempFolder("raw-sqlite");
  const db = new RawSqlite(folder.file("raw.db"));
  const ids = sessionIds(shape.writers);
  let head = 0;
  return {
    async measure() {
      const started = performance.now();
      for (let n = 0; n < shape.appendsPerWriter; n++) {
        const seq = ++head;
        db.insertBatch(ids.map((sessionId, i) => ({ sessionId, seq, event: deltaEvent(i) })));
      }
      const elapsed = performance.now() - started;
      const total = shape.writers * shape.appendsPerWriter;
      return appended(
        total,
        elapsed,
        `${total} rows, ${shape.appendsPerWriter} transactions of ${shape.writers}`,
      );
    },
    async close() {
      db.close();
      folder.remove();
    },
  };
}

/**
 * The sessionmux store: `writers` concurrent writers, each awaiting one `append` at a time. The
 * store and its sessions are set up once; each `measure` appends `appendsPerWriter` per writer.
 */
export async function openStoreAppends(shape: AppendShape): Promise<OpenSubject> {
  const { SqliteSessionStore } = await import("../../src/store/sqlite-store.js");
  const folder = tempFolder("store");
  const store = SqliteSessionStore.open(folder.file("sessions.db"));
  const close = async () => {
    await store.close();
    folder.remove();
  };
  const ids = sessionIds(shape.writers);
  try {
    for (const sessionId of ids) await store.create({ sessionId, owner: BENCH_OWNER, model: "demo" });
  } catch (error) {
    await close();
    throw error;
  }
  return {
    async measure() {
      const { total, ms, transactions } = await timedAppends(store, ids, shape, deltaEvent);
      return appended(
        total,
        ms,
        `${total} acknowledged appends, ${shape.writers} writers, ${transactions} transactions`,
      );
    },
    close,
  };
}

/** Every writer renames its own session `appendsPerWriter` times over its own socket. */
const renames = (shape: AppendShape, callers: readonly MuxCaller[]) => {
  const ids = sessionIds(shape.writers);
  return timedWriters(shape, (i, n) =>
    callers[i]!.call("session.rename", { sessionId: ids[i]!, title: `title ${n}` }),
  );
};

/**
 * Acknowledged appends over the wire: `session.rename` (one event, answered after commit) per call.
 * Each writer is its own principal owning its session, as independent agents or users are: a
 * principal's sockets all hear of its sessions' changes, which 100 sockets of one principal would
 * multiply by 100 in this process (the callers share it with the host). The host, sessions and
 * sockets are set up once; each `measure` is one batch of calls.
 */
export async function openWireAppends(shape: AppendShape): Promise<OpenSubject> {
  const subject = await startSessionmux({ writers: shape.writers });
  const callers: MuxCaller[] = [];
  const close = async () => {
    for (const caller of callers) caller.close();
    await subject.close();
  };
  try {
    const ids = sessionIds(shape.writers);
    for (const [i, sessionId] of ids.entries()) {
      const created = await subject.running.store.create({ sessionId, owner: writerName(i), model: "demo" });
      if (created.status !== "created") throw new Error(`create ${sessionId}: ${created.status}`);
    }
    for (let i = 0; i < shape.writers; i++)
      callers.push(await MuxCaller.connect(subject.url, writerToken(i)));
  } catch (error) {
    await close();
    throw error;
  }
  return {
    async measure() {
      const before = subject.running.store.stats().transactions;
      const { total, ms } = await renames(shape, callers);
      const transactions = subject.running.store.stats().transactions - before;
      return appended(
        total,
        ms,
        `${total} acknowledged appends over the mux, ${shape.writers} sockets, ${transactions} transactions`,
      );
    },
    close,
  };
}

/** The Durable Streams reference: one stream per writer, one awaited client `append` per event. */
export async function openDurableStreamsAppends(
  start: () => Promise<DurableStreamsPeer>,
  shape: AppendShape,
): Promise<OpenSubject> {
  const peer = await start();
  let handles: Awaited<ReturnType<DurableStreamsPeer["create"]>>[];
  try {
    handles = await Promise.all(sessionIds(shape.writers).map((id) => peer.create(id)));
  } catch (error) {
    await peer.close();
    throw error;
  }
  return {
    async measure() {
      const { total, ms } = await timedWriters(shape, (i) => peer.appendOne(handles[i]!, deltaEvent(i)));
      return appended(total, ms, `${total} acknowledged appends over HTTP, ${shape.writers} writers`);
    },
    close: () => peer.close(),
  };
}

/** The limit over the network: the same calls answered by bare `ws` + batched better-sqlite3 inserts. */
export async function openRawWsAppends(shape: AppendShape): Promise<OpenSubject> {
  const folder = tempFolder("raw-ws-append");
  const server = await startRawWsAppend(folder.file("raw.db"));
  const callers: MuxCaller[] = [];
  const close = async () => {
    for (const caller of callers) caller.close();
    await server.close();
    folder.remove();
  };
  try {
    for (let i = 0; i < shape.writers; i++) callers.push(await MuxCaller.connect(server.url, BENCH_TOKEN));
  } catch (error) {
    await close();
    throw error;
  }
  return {
    async measure() {
      const { total, ms } = await renames(shape, callers);
      return appended(total, ms, `${total} acknowledged appends over bare ws, ${shape.writers} sockets`);
    },
    close,
  };
}
