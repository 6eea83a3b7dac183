import Database from "better-sqlite3";
import { describe, expect, it, vi } from "vitest";
import { AttachmentSweeper } from "../../src/store/attachment-sweeper.js";
import { SqliteSessionStore } from "../../src/store/sqlite-store.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { UNDO_UNREFERENCED_UPLOAD_INDEXES } from "../support/purge-migration.js";
import { tempDir } from "../support/temp-dir.js";

/**
 * The expiry of uploads no prompt references, on a connection of its own to a real store file:
 * when it gives freed pages back to the file system, and for how long. The page figures and the
 * vacuum steps are read on that connection (a spy that calls through to SQLite).
 */

const MIB = 1024 * 1024;
const cleanups = cleanupsAfterEach();

/** A store file holding `uploads` unreferenced 1 MiB uploads made at 1,000 ms, opened for the sweeper. */
async function storeFile(uploads: number): Promise<Database.Database> {
  const dir = tempDir("sessionmux-sweeper-");
  cleanups.push(() => dir.remove());
  const path = dir.file("sessions.db");
  const store = SqliteSessionStore.open(path, { now: () => 1_000 });
  for (let i = 0; i < uploads; i++) {
    await store.putAttachment({ owner: "o", name: `f${i}`, type: "x/y", bytes: new Uint8Array(MIB).fill(i) });
  }
  await store.close();
  const db = new Database(path);
  cleanups.push(() => {
    db.close();
  });
  return db;
}

const freePages = (db: Database.Database) => db.pragma("freelist_count", { simple: true }) as number;
const uploadsLeft = (db: Database.Database) =>
  (db.prepare("SELECT count(*) AS n FROM attachments").get() as { n: number }).n;

/** Counts the vacuum steps run on `db`, every pragma still reaching SQLite. */
function vacuumSteps(db: Database.Database): () => number {
  const pragma = vi.spyOn(db, "pragma");
  return () => pragma.mock.calls.filter(([source]) => source.startsWith("incremental_vacuum")).length;
}

describe("the sweep of expired uploads", () => {
  it("gives every page it freed back to the file system, 256 at a time, and stops once none is free", async () => {
    const db = await storeFile(2);
    const sweeper = new AttachmentSweeper(db);
    const steps = vacuumSteps(db);
    const pagesBefore = db.pragma("page_count", { simple: true }) as number;
    expect(await sweeper.sweep(2_000)).toBe(2);
    expect(freePages(db)).toBe(0);
    const shrunk = pagesBefore - (db.pragma("page_count", { simple: true }) as number);
    expect(shrunk).toBeGreaterThanOrEqual((2 * MIB) / 4096);
    // one step per 256 pages given back, not the 1,024 of the bound
    expect(steps()).toBe(Math.ceil(shrunk / 256));
  });

  it("on a file made before incremental auto_vacuum, deletes them and runs no vacuum step: SQLite reuses the pages", async () => {
    const db = await storeFile(2);
    db.pragma("auto_vacuum = NONE");
    db.exec("VACUUM");
    const sweeper = new AttachmentSweeper(db);
    const steps = vacuumSteps(db);
    expect(await sweeper.sweep(2_000)).toBe(2);
    expect(uploadsLeft(db)).toBe(0);
    // a vacuum step gives nothing back on such a file: run 1,024 times, it would only hold the sweep
    expect(steps()).toBe(0);
    expect(freePages(db)).toBeGreaterThanOrEqual((2 * MIB) / 4096);
  });

  it("that expires nothing runs no vacuum step, leaving the pages other deletes freed for SQLite to reuse", async () => {
    const db = await storeFile(1);
    const sweeper = new AttachmentSweeper(db);
    // as a session's delete removes its attachments: their pages stay free, to be reused
    db.exec("UPDATE attachments SET session_id = 's'; DELETE FROM attachments WHERE session_id = 's'");
    const freed = freePages(db);
    expect(freed).toBeGreaterThanOrEqual(MIB / 4096);
    const steps = vacuumSteps(db);
    expect(await sweeper.sweep(2_000)).toBe(0);
    expect(steps()).toBe(0);
    expect(freePages(db)).toBe(freed);
  });

  it("gives pages back for at most 1,024 steps while another writer frees pages as fast", async () => {
    const db = await storeFile(1);
    // the churn is not what is measured: no fsync per commit
    db.pragma("synchronous = OFF");
    db.exec("CREATE TABLE churn (body BLOB)");
    const churn = db.prepare("INSERT INTO churn (body) VALUES (zeroblob(16384))");
    const clear = db.prepare("DELETE FROM churn");
    const sweeper = new AttachmentSweeper(db);
    const steps = vacuumSteps(db);
    // a writer that frees pages on every event-loop turn, and stops by itself past the bound
    let turns = 0;
    const writer = new Promise<void>((resolve) => {
      const turn = () => {
        churn.run();
        clear.run();
        if (++turns < 1_100) setImmediate(turn);
        else resolve();
      };
      setImmediate(turn);
    });
    expect(await sweeper.sweep(2_000)).toBe(1);
    expect(steps()).toBe(1_024);
    expect(turns).toBeLessThan(1_100);
    await writer;
  });

  it("stops: no sweep runs once stopped", async () => {
    vi.useFakeTimers({ toFake: ["setInterval", "clearInterval"] });
    cleanups.push(() => {
      vi.useRealTimers();
    });
    const db = await storeFile(1);
    const sweeper = new AttachmentSweeper(db);
    const errors: unknown[] = [];
    sweeper.start(
      1_000,
      100,
      (err) => errors.push(err),
      () => 60_000,
    );
    sweeper.stop();
    await vi.advanceTimersByTimeAsync(1_000);
    expect(uploadsLeft(db)).toBe(1);
    // started again, it sweeps at its next interval
    sweeper.start(
      1_000,
      100,
      (err) => errors.push(err),
      () => 60_000,
    );
    await vi.advanceTimersByTimeAsync(100);
    expect(uploadsLeft(db)).toBe(0);
    sweeper.stop();
    expect(errors).toEqual([]);
  });
});

describe("what the upload quota and the sweep read", () => {
  /** The query plan of each statement `build` prepares on `db`, one line of SQLite's details each. */
  function plansOf(db: Database.Database, build: () => void): string[] {
    const prepare = vi.spyOn(db, "prepare");
    let sources: string[];
    try {
      build();
    } finally {
      sources = prepare.mock.calls.map(([source]) => source);
      prepare.mockRestore();
    }
    return sources.map((source) =>
      (db.prepare(`EXPLAIN QUERY PLAN ${source}`).all(...parameters(source)) as { detail: string }[])
        .map((row) => row.detail)
        .join("; "),
    );
  }
  const parameters = (source: string) => Array.from(source.matchAll(/\?/g), () => "o");

  it("searches the unreferenced uploads by index, the referenced ones never read", async () => {
    // Before, both scanned every attachment row on the event loop, each upload and each sweep step:
    // 27 ms and 21 ms at 200,000 rows, referenced ones (kept as long as their sessions) included.
    const db = await storeFile(0);
    const plans = plansOf(db, () => new AttachmentSweeper(db));
    expect(plans).toHaveLength(2);
    expect(plans[0]).toMatch(
      /^SEARCH attachments USING (COVERING )?INDEX attachments_unreferenced_by_owner \(owner=\?\)$/,
    );
    expect(plans[1]).toMatch(
      /SEARCH attachments USING (COVERING )?INDEX attachments_unreferenced_by_age \(created_at<\?\)/,
    );
    expect(plans.join("\n")).not.toMatch(/SCAN attachments/);
  });

  it("counts each unreferenced upload of its owner at least 4 KiB, an empty one too, and no referenced one", async () => {
    const db = await storeFile(0);
    const add = db.prepare(
      "INSERT INTO attachments (attachment_id, owner, session_id, name, type, size, bytes, created_at) VALUES (?, ?, ?, 'f', 't', ?, x'', 1)",
    );
    add.run("a", "o", null, 0);
    add.run("b", "o", null, 10_000);
    add.run("c", "o", "s", 20_000);
    add.run("d", "p", null, 5);
    const sweeper = new AttachmentSweeper(db);
    expect(await sweeper.pendingBytes("o")).toBe(4096 + 10_000);
    expect(await sweeper.pendingBytes("p")).toBe(4096);
    expect(await sweeper.pendingBytes("q")).toBe(0);
  });

  it("a file of schema 12 gains both indexes when opened", async () => {
    const dir = tempDir("sessionmux-sweeper-");
    cleanups.push(() => dir.remove());
    const path = dir.file("sessions.db");
    await SqliteSessionStore.open(path).close();
    const old = new Database(path);
    old.exec(UNDO_UNREFERENCED_UPLOAD_INDEXES);
    old.pragma("user_version = 12");
    old.close();
    await SqliteSessionStore.open(path).close();
    const db = new Database(path, { readonly: true });
    cleanups.push(() => {
      db.close();
    });
    expect(db.pragma("user_version", { simple: true })).toBe(13);
    const names = db
      .prepare(
        "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'attachments' ORDER BY name",
      )
      .pluck()
      .all();
    expect(names).toEqual(
      expect.arrayContaining(["attachments_unreferenced_by_age", "attachments_unreferenced_by_owner"]),
    );
  });
});
