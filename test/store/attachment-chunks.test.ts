import Database from "better-sqlite3";
import { afterEach, describe, expect, it } from "vitest";
import { ATTACHMENT_CHUNK_BYTES } from "../../src/store/attachment-chunks.js";
import { openTempStore } from "./open-store.js";

const MIB = 1024 * 1024;

const opened: { dispose(): Promise<void> }[] = [];
afterEach(async () => {
  for (const one of opened.splice(0)) await one.dispose();
});

function open(options: Parameters<typeof openTempStore>[0] = {}) {
  const env = openTempStore(options);
  opened.push(env);
  return env;
}

/** Runs `sql` on another connection to the same file, as a second process would. */
function onFile<T>(path: string, run: (db: Database.Database) => T): T {
  const db = new Database(path);
  try {
    return run(db);
  } finally {
    db.close();
  }
}

const chunkRows = (path: string, id: string) =>
  onFile(
    path,
    (db) =>
      (
        db.prepare("SELECT count(*) AS n FROM attachment_chunks WHERE attachment_id = ?").get(id) as {
          n: number;
        }
      ).n,
  );

const body = (size: number) => {
  const bytes = new Uint8Array(size);
  for (let i = 0; i < size; i++) bytes[i] = i % 251;
  return bytes;
};

describe("SQLite attachment chunks: what a client's upload and download can push against", () => {
  it("an upload writes 4 chunks per transaction: 1 MiB is one, 1 MiB + 1 byte two", async () => {
    const { store } = open();
    const before = store.stats().transactions;
    await store.putAttachment({ owner: "o", name: "a", type: "x/y", bytes: body(MIB) });
    expect(store.stats().transactions - before).toBe(1);
    await store.putAttachment({ owner: "o", name: "b", type: "x/y", bytes: body(MIB + 1) });
    expect(store.stats().transactions - before).toBe(3);
  });

  it("an upload swept between its transactions fails attachment_not_found and leaves no chunk behind", async () => {
    let clock = 1_000;
    const { store, path } = open({ now: () => clock });
    const putting = store.putAttachment({ owner: "o", name: "big", type: "x/y", bytes: body(3 * MIB) });
    putting.catch(() => undefined);
    // queued in the same tick, so it commits in the upload's first transaction and is answered
    // before the upload's second one runs
    const small = await store.putAttachment({ owner: "o", name: "small", type: "x/y", bytes: body(10) });
    clock = 5_000;
    expect(await store.attachmentSweeper().sweep(2_000)).toBe(2);
    await expect(putting).rejects.toMatchObject({ code: "attachment_not_found" });
    expect(await store.attachmentInfo(small)).toBeNull();
    expect(onFile(path, (db) => db.prepare("SELECT count(*) AS n FROM attachment_chunks").get())).toEqual({
      n: 0,
    });
    expect(await store.ownerStoredBytes("o")).toBe(0);
  });

  it("an upload whose later transaction fails on a full disk is removed whole and fails persistence_failure", async () => {
    const { store, path } = open();
    // room for the first transaction (1 MiB) and not for the whole 4 MiB body
    const used = onFile(path, (db) => (db.pragma("page_count", { simple: true }) as number) * 4096);
    store.limitSize(used + 2 * MIB);
    await expect(
      store.putAttachment({ owner: "o", name: "big", type: "x/y", bytes: body(4 * MIB) }),
    ).rejects.toMatchObject({ code: "persistence_failure" });
    store.limitSize(null);
    expect(onFile(path, (db) => db.prepare("SELECT count(*) AS n FROM attachments").get())).toEqual({ n: 0 });
    expect(onFile(path, (db) => db.prepare("SELECT count(*) AS n FROM attachment_chunks").get())).toEqual({
      n: 0,
    });
    expect(await store.ownerStoredBytes("o")).toBe(0);
  });

  it("stored chunks that do not add up to the size are never answered as the body", async () => {
    const { store, path } = open();
    const size = 2 * ATTACHMENT_CHUNK_BYTES + 1234;
    const short = await store.putAttachment({ owner: "o", name: "s", type: "x/y", bytes: body(size) });
    const long = await store.putAttachment({ owner: "o", name: "l", type: "x/y", bytes: body(size) });
    onFile(path, (db) => {
      const set = db.prepare("UPDATE attachment_chunks SET bytes = ? WHERE attachment_id = ? AND idx = 2");
      set.run(Buffer.alloc(1000, 1), short);
      set.run(Buffer.alloc(1300, 1), long);
    });
    // not padded with zeros, not a RangeError
    await expect(store.getAttachment(short)).rejects.toMatchObject({
      code: "attachment_not_found",
      message: `attachment ${short} was deleted while read`,
      data: { attachmentId: short },
    });
    await expect(store.getAttachment(long)).rejects.toMatchObject({
      code: "attachment_not_found",
      data: { attachmentId: long },
    });
    expect(chunkRows(path, short)).toBe(3);
  });

  it("a download gives the event loop a turn between two chunks", async () => {
    const { store } = open();
    const id = await store.putAttachment({
      owner: "o",
      name: "n",
      type: "x/y",
      bytes: body(3 * ATTACHMENT_CHUNK_BYTES),
    });
    const reading = store.attachmentChunks(id)[Symbol.asyncIterator]();
    expect((await reading.next()).value?.byteLength).toBe(ATTACHMENT_CHUNK_BYTES);
    let turned = false;
    setImmediate(() => {
      turned = true;
    });
    expect((await reading.next()).value?.byteLength).toBe(ATTACHMENT_CHUNK_BYTES);
    expect(turned).toBe(true);
    turned = false;
    setImmediate(() => {
      turned = true;
    });
    expect((await reading.next()).value?.byteLength).toBe(ATTACHMENT_CHUNK_BYTES);
    expect(turned).toBe(true);
    expect((await reading.next()).done).toBe(true);
  });

  it("a read that throws is an error, not a missing attachment", async () => {
    const env = openTempStore();
    const id = await env.store.putAttachment({ owner: "o", name: "n", type: "x/y", bytes: body(10) });
    await env.store.close();
    try {
      await expect(env.store.attachmentInfo(id)).rejects.toThrow(/not open/);
      await expect(env.store.getAttachment(id)).rejects.toThrow(/not open/);
    } finally {
      env.dir.remove();
    }
  });
});
