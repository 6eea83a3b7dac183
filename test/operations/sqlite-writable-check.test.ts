import { existsSync, readFileSync } from "node:fs";
import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { sqliteWritableCheck } from "../../src/operations/sqlite-writable-check.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { tempDir } from "../support/temp-dir.js";

/**
 * `/readyz` on SQLite: a connection of its own that takes the write lock and gives it back, writing
 * nothing; busy while another connection holds the lock.
 */

const cleanups = cleanupsAfterEach();

/** A SQLite file with one row in it, and a connection of the test's own to it. */
function database(): { file: string; db: Database.Database } {
  const dir = tempDir("sessionmux-writable-");
  cleanups.push(() => dir.remove());
  const file = dir.file("sessions.db");
  const db = new Database(file);
  cleanups.push(() => {
    db.close();
  });
  db.exec("CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1)");
  return { file, db };
}

describe("sqliteWritableCheck", () => {
  it("takes the write lock and gives it back, again and again, writing nothing", () => {
    const { file, db } = database();
    const bytes = readFileSync(file);
    const writable = sqliteWritableCheck(file);
    cleanups.push(() => writable.close());
    for (let i = 0; i < 3; i++) {
      writable.check();
      // the lock is free again at once: another connection takes it without waiting
      db.exec("BEGIN IMMEDIATE; ROLLBACK");
    }
    expect(readFileSync(file).equals(bytes)).toBe(true);
  });

  it("fails while another connection holds the write lock, and passes once it is let go", () => {
    const { file, db } = database();
    const writable = sqliteWritableCheck(file, 1);
    cleanups.push(() => writable.close());
    db.exec("BEGIN IMMEDIATE");
    expect(() => writable.check()).toThrow(expect.objectContaining({ code: "SQLITE_BUSY" }));
    db.exec("ROLLBACK");
    writable.check();
  });

  it("refuses a file that is not there, and creates none", () => {
    const dir = tempDir("sessionmux-writable-");
    cleanups.push(() => dir.remove());
    expect(() => sqliteWritableCheck(dir.file("missing.db"))).toThrow();
    expect(existsSync(dir.file("missing.db"))).toBe(false);
  });

  it("closes its connection: no check after close", () => {
    const { file } = database();
    const writable = sqliteWritableCheck(file);
    writable.check();
    writable.close();
    expect(() => writable.check()).toThrow(/not open/);
  });
});
