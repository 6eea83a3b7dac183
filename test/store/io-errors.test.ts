import { closeSync, openSync, writeSync } from "node:fs";
import Database from "better-sqlite3";
import { afterEach, describe, expect, it } from "vitest";
import { SessionmuxError } from "../../protocol/index.js";
import { isStorageFailure, persistenceFailure } from "../../src/store/io-errors.js";
import { tempDir } from "../support/temp-dir.js";

/**
 * How the SQLite store tells the storage failing (the whole batch fails with
 * `persistence_failure`, retryable once storage recovers) from a fault in one operation's data
 * (the batch is re-run one by one, so only that caller sees SQLite's own error). Most failures are
 * raised by SQLite itself on a real file; the few no test can bring about on demand (out of memory,
 * the WAL index protocol, large files unsupported, an I/O error of one kind) are built as
 * better-sqlite3 raises them, with its own error class.
 */
const dirs: ReturnType<typeof tempDir>[] = [];
const dbs: Database.Database[] = [];
afterEach(() => {
  for (const db of dbs.splice(0)) if (db.open) db.close();
  for (const dir of dirs.splice(0)) dir.remove();
});

function freshPath(): string {
  const dir = tempDir("sessionmux-io-errors-");
  dirs.push(dir);
  return dir.file("sessions.db");
}

function openDb(path: string, options?: Database.Options): Database.Database {
  const db = new Database(path, options);
  dbs.push(db);
  return db;
}

function thrown(run: () => unknown): unknown {
  try {
    run();
  } catch (err) {
    return err;
  }
  throw new Error("expected a failure");
}

function withTable(): { path: string; db: Database.Database } {
  const path = freshPath();
  const db = openDb(path);
  db.exec("CREATE TABLE events (id INTEGER PRIMARY KEY, body TEXT NOT NULL)");
  db.prepare("INSERT INTO events (body) VALUES (?)").run("x".repeat(10_000));
  return { path, db };
}

describe("SQLite failures as the store sorts them", () => {
  it("a full file, a read-only one, one that cannot be opened, and a lock held elsewhere are storage failures", () => {
    const { path, db } = withTable();
    db.pragma(`max_page_count = ${db.pragma("page_count", { simple: true })}`);
    const full = thrown(() => db.prepare("INSERT INTO events (body) VALUES (?)").run("y".repeat(50_000)));
    expect(full).toMatchObject({ code: "SQLITE_FULL" });
    expect(isStorageFailure(full)).toBe(true);

    const readOnly = openDb(path, { readonly: true });
    const refused = thrown(() => readOnly.prepare("INSERT INTO events (body) VALUES ('z')").run());
    expect(refused).toMatchObject({ code: "SQLITE_READONLY" });
    expect(isStorageFailure(refused)).toBe(true);

    // a folder where the database file should be
    const cantOpen = thrown(() => openDb(dirs[0]!.path).prepare("SELECT 1 FROM sqlite_master").get());
    expect(cantOpen).toMatchObject({ code: "SQLITE_CANTOPEN" });
    expect(isStorageFailure(cantOpen)).toBe(true);

    // another connection (another process, as far as SQLite knows) holds the write lock
    db.pragma("max_page_count = 1000000");
    db.exec("BEGIN IMMEDIATE");
    const other = openDb(path, { timeout: 0 });
    const busy = thrown(() => other.exec("BEGIN IMMEDIATE"));
    db.exec("ROLLBACK");
    expect(busy).toMatchObject({ code: "SQLITE_BUSY" });
    expect(isStorageFailure(busy)).toBe(true);
  });

  it("a damaged file and a file that is no database are storage failures", () => {
    const { path, db } = withTable();
    db.close();
    // the table's pages overwritten: the schema still reads, the rows do not
    const fd = openSync(path, "r+");
    writeSync(fd, Buffer.alloc(8192, 0xa5), 0, 8192, 4096);
    closeSync(fd);
    const damaged = openDb(path);
    const corrupt = thrown(() => damaged.prepare("SELECT sum(length(body)) FROM events").get());
    expect((corrupt as { code?: string }).code).toMatch(/^SQLITE_CORRUPT/);
    expect(isStorageFailure(corrupt)).toBe(true);

    const junk = freshPath();
    const fd2 = openSync(junk, "w");
    writeSync(fd2, Buffer.alloc(4096, 0x5a));
    closeSync(fd2);
    const notADb = thrown(() => openDb(junk).prepare("SELECT 1 FROM sqlite_master").get());
    expect(notADb).toMatchObject({ code: "SQLITE_NOTADB" });
    expect(isStorageFailure(notADb)).toBe(true);
  });

  it.each([
    ["SQLITE_IOERR", "disk I/O error"],
    ["SQLITE_IOERR_WRITE", "disk I/O error"],
    ["SQLITE_IOERR_FSYNC", "disk I/O error"],
    ["SQLITE_LOCKED", "database table is locked"],
    ["SQLITE_LOCKED_SHAREDCACHE", "database table is locked"],
    ["SQLITE_READONLY_DBMOVED", "attempt to write a readonly database"],
    ["SQLITE_NOMEM", "out of memory"],
    ["SQLITE_PROTOCOL", "locking protocol"],
    ["SQLITE_NOLFS", "large file support is disabled"],
    ["SQLITE_CORRUPT_INDEX", "database disk image is malformed"],
  ])("%s (and each extended code of a storage failure) is a storage failure", (code, message) => {
    expect(isStorageFailure(new Database.SqliteError(message, code))).toBe(true);
  });

  it("a fault in one operation's data or statement is not a storage failure", () => {
    const { db } = withTable();
    const duplicate = thrown(() => db.prepare("INSERT INTO events (id, body) VALUES (1, 'again')").run());
    expect(duplicate).toMatchObject({ code: "SQLITE_CONSTRAINT_PRIMARYKEY" });
    const missing = thrown(() => db.prepare("INSERT INTO events (id) VALUES (2)").run());
    expect(missing).toMatchObject({ code: "SQLITE_CONSTRAINT_NOTNULL" });
    const mismatch = thrown(() => db.prepare("INSERT INTO events (id, body) VALUES ('two', 'b')").run());
    expect(mismatch).toMatchObject({ code: "SQLITE_MISMATCH" });
    const syntax = thrown(() => db.prepare("INSERT INTO nowhere VALUES (1)"));
    expect(syntax).toMatchObject({ code: "SQLITE_ERROR" });
    const tooBig = thrown(() => db.prepare("SELECT zeroblob(1e10)").get());
    expect(tooBig).toMatchObject({ code: "SQLITE_TOOBIG" });
    for (const err of [duplicate, missing, mismatch, syntax, tooBig])
      expect(isStorageFailure(err)).toBe(false);

    // the program's own errors, and thrown values that are no errors
    expect(isStorageFailure(new TypeError("cannot read properties of undefined"))).toBe(false);
    for (const value of [undefined, null, "SQLITE_FULL", 13, { code: 13 }])
      expect(isStorageFailure(value)).toBe(false);
  });

  it("a storage failure reaches the caller as persistence_failure with SQLite's code and the error as its cause", () => {
    const err = new Database.SqliteError("database or disk is full", "SQLITE_FULL");
    const failure = persistenceFailure(err);
    expect(failure).toBeInstanceOf(SessionmuxError);
    expect(failure).toMatchObject({
      code: "persistence_failure",
      retryable: true,
      message: "the session store could not write; retry later",
      data: { sqlite: "SQLITE_FULL" },
    });
    expect(failure.cause).toBe(err);
    // an error with no code carries no data
    const bare = new Error("disk gone");
    expect(persistenceFailure(bare).data).toBeUndefined();
    expect(persistenceFailure(bare).cause).toBe(bare);
    expect(persistenceFailure(undefined).data).toBeUndefined();
  });
});
