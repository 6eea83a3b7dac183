import { randomBytes } from "node:crypto";
import Database from "better-sqlite3";
import pg from "pg";
import { expect, it } from "vitest";
import type { AttachmentShell } from "../../../protocol/index.js";
import { ATTACHMENT_CHUNK_BYTES } from "../../../src/store/attachment-chunks.js";
import type { SessionStore } from "../../../src/store/session-store.js";
import { describeContract, pgUrl, type StoreUnderTest, storeFixture } from "./backends.js";

async function collect(chunks: AsyncIterable<Uint8Array>): Promise<Uint8Array[]> {
  const parts: Uint8Array[] = [];
  for await (const chunk of chunks) parts.push(chunk);
  return parts;
}

const put = (store: SessionStore, bytes: Uint8Array) =>
  store.putAttachment({ owner: "o", name: "big.bin", type: "application/octet-stream", bytes });

/** A user message `messageId` naming `attachments`: what links an upload to its session. */
const messageWith = (messageId: string, attachments: AttachmentShell[]) => ({
  type: "user/message" as const,
  data: { messageId, source: "user" as const, text: "see file", attachments, meta: {} },
});

/** The shell of the upload `attachmentId` as a message names it. */
const named = (attachmentId: string, size: number): AttachmentShell => ({
  name: "big.bin",
  type: "application/octet-stream",
  size,
  attachmentId,
});

/** Chunk rows of every attachment, read beside the store: what is left of bodies on disk. */
async function chunkRows(db: StoreUnderTest): Promise<number> {
  const sql = "SELECT count(*) AS n FROM attachment_chunks";
  if (db.path) {
    const raw = new Database(db.path, { readonly: true });
    try {
      return (raw.prepare(sql).get() as { n: number }).n;
    } finally {
      raw.close();
    }
  }
  const client = new pg.Client({ connectionString: pgUrl! });
  await client.connect();
  try {
    await client.query(`SET search_path TO "${db.schema}"`);
    return Number((await client.query<{ n: string }>(sql)).rows[0]?.n);
  } finally {
    await client.end();
  }
}

describeContract("attachments", (backend) => {
  const open = storeFixture(backend);
  it("stores bytes, links them to the session whose message uses them, and deletes them with it", async () => {
    const { store } = await open();
    const bytes = new Uint8Array([1, 2, 3, 250]);
    const used = await store.putAttachment({
      owner: "o",
      name: "a.bin",
      type: "application/octet-stream",
      bytes,
    });
    const spare = await store.putAttachment({
      owner: "o",
      name: "b.bin",
      type: "text/plain",
      bytes: new Uint8Array(2),
    });
    expect(await store.getAttachment(used)).toEqual({
      attachmentId: used,
      owner: "o",
      sessionId: null,
      name: "a.bin",
      type: "application/octet-stream",
      size: 4,
      bytes,
    });
    await store.create({ sessionId: "s", owner: "o", model: "m" });
    await store.append("s", [
      messageWith("m", [
        // a shell with no upload behind it (a link) links nothing
        { name: "link.png", type: "image/png", size: 10, url: "http://127.0.0.1/link.png" },
        { name: "a.bin", type: "application/octet-stream", size: 4, attachmentId: used },
      ]),
    ]);
    expect((await store.getAttachment(used))?.sessionId).toBe("s");
    const read = await store.readAfter("s", 1, 10);
    expect(read.status === "ok" && read.events.map((event) => event.type)).toEqual(["user/message"]);
    await store.delete("s");
    expect(await store.getAttachment(used)).toBeNull();
    // an upload no session used is not the deleted session's to remove
    expect((await store.getAttachment(spare))?.size).toBe(2);
  });

  it("an upload stays the session that used it first: another session's message naming it takes nothing", async () => {
    const { store } = await open();
    const used = await put(store, new Uint8Array([7, 7]));
    for (const sessionId of ["first", "second"]) {
      await store.create({ sessionId, owner: "o", model: "m" });
      await store.append(sessionId, [messageWith(`m-${sessionId}`, [named(used, 2)])]);
    }
    expect((await store.getAttachment(used))?.sessionId).toBe("first");
    await store.delete("second");
    expect((await store.getAttachment(used))?.size).toBe(2);
    await store.delete("first");
    expect(await store.getAttachment(used)).toBeNull();
  });

  it("links the uploads a queued prompt names to its session as it is queued, as a message's: no longer unused, they do not expire while it waits", async () => {
    const { store } = await open();
    const queued = await put(store, new Uint8Array([1, 2]));
    const spare = await put(store, new Uint8Array([3]));
    await store.create({ sessionId: "s", owner: "o", model: "m" });
    const outcome = await store.enqueuePrompt({
      sessionId: "s",
      itemId: "q1",
      queuedAt: 1,
      input: {
        text: "see file",
        attachments: [
          { name: "big.bin", type: "application/octet-stream", attachmentId: queued },
          { name: "inline.bin", type: "application/octet-stream", bytes: new Uint8Array([9]) },
        ],
      },
    });
    expect(outcome.status).toBe("queued");
    // before, null until the prompt's turn began: the uploads sweeper deleted it as unused
    expect((await store.attachmentInfo(queued))?.sessionId).toBe("s");
    expect((await store.attachmentInfo(spare))?.sessionId).toBeNull();
    // its turn's message, once it starts, finds it the session's already
    await store.append("s", [messageWith("m", [named(queued, 2)])], {
      dequeue: { itemId: "q1", turnId: "t1" },
    });
    expect((await store.attachmentInfo(queued))?.sessionId).toBe("s");
    await store.delete("s");
    expect(await store.attachmentInfo(queued)).toBeNull();
  });

  it("discards an attachment no message references, its chunks and its bytes on the owner; a referenced one stays", async () => {
    const db = await open();
    const { store } = db;
    const before = await store.ownerStoredBytes("o");
    const kept = await put(store, new Uint8Array(3));
    const dropped = await put(store, new Uint8Array(randomBytes(ATTACHMENT_CHUNK_BYTES + 10)));
    await store.create({ sessionId: "s", owner: "o", model: "m" });
    await store.append("s", [messageWith("m", [named(kept, 3)])]);
    const withBoth = await store.ownerStoredBytes("o");
    expect(await chunkRows(db)).toBe(3);
    await store.discardAttachment(dropped);
    await store.discardAttachment(kept);
    await store.discardAttachment("nope");
    expect(await store.attachmentInfo(dropped)).toBeNull();
    expect((await store.getAttachment(kept))?.sessionId).toBe("s");
    expect(await chunkRows(db)).toBe(1);
    expect(await store.ownerStoredBytes("o")).toBe(withBoth - (ATTACHMENT_CHUNK_BYTES + 10));
    expect(withBoth - before).toBeGreaterThan(ATTACHMENT_CHUNK_BYTES + 10);
  });

  it("answers null for an unknown id", async () => {
    const { store } = await open();
    expect(await store.getAttachment("nope")).toBeNull();
  });

  it("keeps a body in chunks: read one at a time, joined exactly, info without the bytes", async () => {
    const { store } = await open();
    const bytes = new Uint8Array(randomBytes(2 * ATTACHMENT_CHUNK_BYTES + 1234));
    const id = await put(store, bytes);
    expect(await store.attachmentInfo(id)).toEqual({
      attachmentId: id,
      owner: "o",
      sessionId: null,
      name: "big.bin",
      type: "application/octet-stream",
      size: bytes.byteLength,
    });
    const parts = await collect(store.attachmentChunks(id));
    expect(parts.map((p) => p.byteLength)).toEqual([ATTACHMENT_CHUNK_BYTES, ATTACHMENT_CHUNK_BYTES, 1234]);
    expect(Buffer.concat(parts).equals(bytes)).toBe(true);
    expect(Buffer.from((await store.getAttachment(id))!.bytes).equals(bytes)).toBe(true);
    // an empty upload has no chunks at all
    const empty = await put(store, new Uint8Array(0));
    expect(await collect(store.attachmentChunks(empty))).toEqual([]);
    expect((await store.getAttachment(empty))?.bytes).toEqual(new Uint8Array(0));
  });

  it("a body deleted while it is read ends the read with attachment_not_found, and its chunks are gone", async () => {
    const { store } = await open();
    const id = await put(store, new Uint8Array(3 * ATTACHMENT_CHUNK_BYTES).fill(7));
    await store.create({ sessionId: "s", owner: "o", model: "m" });
    await store.append("s", [messageWith("m", [named(id, 1)])]);
    const reading = store.attachmentChunks(id)[Symbol.asyncIterator]();
    expect((await reading.next()).value?.byteLength).toBe(ATTACHMENT_CHUNK_BYTES);
    await store.delete("s");
    await expect(reading.next()).rejects.toMatchObject({ code: "attachment_not_found" });
    await expect(collect(store.attachmentChunks(id))).rejects.toMatchObject({ code: "attachment_not_found" });
    expect(await store.attachmentInfo(id)).toBeNull();
  });
});
