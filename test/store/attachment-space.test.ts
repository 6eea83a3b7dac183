import { statSync } from "node:fs";
import Database from "better-sqlite3";
import { afterEach, describe, expect, it } from "vitest";
import { ATTACHMENT_CHUNK_BYTES } from "../../src/store/attachment-chunks.js";
import { SqliteSessionStore } from "../../src/store/sqlite-store.js";
import { UNDO_LOG_KEYS } from "../support/purge-migration.js";
import { tempDir } from "../support/temp-dir.js";

/** The schema version before migration 5 split attachment bodies into chunks. */
const VERSION_BEFORE_CHUNKS = 4;

const MIB = 1024 * 1024;
const dirs: { remove(): void }[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) dir.remove();
});

function dbFile(): string {
  const dir = tempDir("sessionmux-space-");
  dirs.push(dir);
  return dir.file("sessions.db");
}

/** Page figures as another connection sees them (the WAL included). */
function pages(path: string): { pageCount: number; freelist: number; chunks: number } {
  const db = new Database(path, { readonly: true });
  try {
    return {
      pageCount: db.pragma("page_count", { simple: true }) as number,
      freelist: db.pragma("freelist_count", { simple: true }) as number,
      chunks: (db.prepare("SELECT count(*) AS n FROM attachment_chunks").get() as { n: number }).n,
    };
  } finally {
    db.close();
  }
}

describe("SQLite: the space of swept uploads goes back to the file system", () => {
  it("a new file is created with auto_vacuum = INCREMENTAL; a sweep shrinks it to what is still used", async () => {
    const path = dbFile();
    let clock = 1_000;
    const store = SqliteSessionStore.open(path, { now: () => clock });
    const bytes = new Uint8Array(MIB).fill(9);
    for (let i = 0; i < 8; i++) await store.putAttachment({ owner: "o", name: `f${i}`, type: "x/y", bytes });
    clock = 5_000;
    const kept = await store.putAttachment({ owner: "o", name: "new", type: "x/y", bytes });
    const full = pages(path);
    expect(full.chunks).toBe((9 * MIB) / ATTACHMENT_CHUNK_BYTES);

    expect(await store.ownerStoredBytes("o")).toBe(9 * MIB);

    const sweeper = store.attachmentSweeper();
    expect(await sweeper.sweep(2_000)).toBe(8);
    // the owner's stored bytes follow (a trigger counts every attachment row in and out)
    expect(await store.ownerStoredBytes("o")).toBe(MIB);
    const swept = pages(path);
    process.stdout.write(
      `swept 8 MiB of uploads: page_count ${full.pageCount} -> ${swept.pageCount}, freelist ${swept.freelist}\n`,
    );
    expect(swept.chunks).toBe(MIB / ATTACHMENT_CHUNK_BYTES);
    expect(swept.freelist).toBe(0);
    expect(full.pageCount - swept.pageCount).toBeGreaterThan((8 * MIB) / 4096);
    expect((await store.getAttachment(kept))?.size).toBe(MIB);
    await store.close();
    // closing checkpoints the WAL: the file on disk is the smaller database
    expect(statSync(path).size).toBeLessThan(2 * MIB);
    const db = new Database(path, { readonly: true });
    expect(db.pragma("auto_vacuum", { simple: true })).toBe(2);
    db.close();
  });

  it("bodies stored whole by an older version are split into chunks when the file is opened", async () => {
    const path = dbFile();
    await SqliteSessionStore.open(path).close();
    // the layout before chunks: bodies in attachments.bytes, no chunk table
    const old = new Database(path);
    // (and before what came after them: the index of large events, the owners' usage, the count
    // of pending interactions)
    old.exec(UNDO_LOG_KEYS);
    old.exec(
      "DROP TRIGGER attachment_chunks_follow; DROP TABLE attachment_chunks; DROP INDEX events_large; " +
        "DROP TRIGGER attachments_counted; DROP TRIGGER attachments_uncounted; DROP TABLE owner_usage; " +
        "ALTER TABLE projections DROP COLUMN pending_interactions",
    );
    old.pragma(`user_version = ${VERSION_BEFORE_CHUNKS}`);
    const body = Buffer.alloc(ATTACHMENT_CHUNK_BYTES * 2 + 10);
    for (let i = 0; i < body.length; i++) body[i] = i % 251;
    const insert = old.prepare(
      "INSERT INTO attachments (attachment_id, owner, session_id, name, type, size, bytes, created_at) VALUES (?, 'o', NULL, 'n', 't', ?, ?, 1)",
    );
    insert.run("legacy", body.length, body);
    insert.run("tiny", 3, Buffer.from([1, 2, 3]));
    old.close();

    const store = SqliteSessionStore.open(path);
    try {
      expect(Buffer.from((await store.getAttachment("legacy"))!.bytes).equals(body)).toBe(true);
      expect((await store.getAttachment("tiny"))!.bytes).toEqual(new Uint8Array([1, 2, 3]));
      const sizes: number[] = [];
      for await (const chunk of store.attachmentChunks("legacy")) sizes.push(chunk.byteLength);
      expect(sizes).toEqual([ATTACHMENT_CHUNK_BYTES, ATTACHMENT_CHUNK_BYTES, 10]);
    } finally {
      await store.close();
    }
    const db = new Database(path, { readonly: true });
    const sizes = db.prepare("SELECT length(bytes) AS n FROM attachments ORDER BY attachment_id").all();
    db.close();
    expect(sizes).toEqual([{ n: 0 }, { n: 0 }]);
  });
});
