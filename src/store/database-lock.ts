import { realpathSync } from "node:fs";
import { hostname } from "node:os";
import { resolve } from "node:path";
import Database from "better-sqlite3";
import { isUnreadableDatabase } from "./io-errors.js";

interface Holder {
  pid: number;
  host: string;
  started_at: number;
}

/**
 * The lock files this process holds, by real path: a refusal tells a second store of this very
 * process from another process (the holder row names only a pid, and holds none while written).
 */
const HELD_HERE = new Set<string>();

/** `path` with its links resolved; as given, made absolute, if it is gone. */
function realPathOf(path: string): string {
  try {
    return realpathSync(path);
  } catch {
    return resolve(path);
  }
}

/** Whether a lock of this process holds `dbPath` (a store open on it here, not in another process). */
export function lockedInThisProcess(dbPath: string): boolean {
  return HELD_HERE.has(realPathOf(`${dbPath}.lock`));
}

/**
 * One host per database file. The lock is a sidecar SQLite file, `<db>.lock`, in which the
 * holder keeps a write transaction open (`BEGIN IMMEDIATE`: SQLite's RESERVED lock), after
 * writing who it is: another process can still read that row to say who holds the lock, and the
 * operating system drops the lock when the holder dies, even by `kill -9`. The database itself
 * is never locked exclusively, so an online backup can read it while the host runs.
 */
export class DatabaseLock {
  readonly path: string;
  #db: Database.Database | undefined;
  readonly #realPath: string;

  private constructor(path: string, db: Database.Database) {
    this.path = path;
    this.#db = db;
    this.#realPath = realPathOf(path);
    HELD_HERE.add(this.#realPath);
  }

  /** Takes the lock of `dbPath`, or throws an Error naming the file and, if known, its holder. */
  static acquire(dbPath: string): DatabaseLock {
    const path = `${dbPath}.lock`;
    const db = new Database(path);
    try {
      db.pragma("busy_timeout = 0");
      try {
        db.exec(
          "CREATE TABLE IF NOT EXISTS holder (pid INTEGER NOT NULL, host TEXT NOT NULL, started_at INTEGER NOT NULL)",
        );
      } catch (err) {
        // a first opener of the file holds it before its table exists
        if (isBusy(err)) throw inUse(dbPath, db);
        throw err;
      }
      // Free a moment ago: say who we are, then hold the lock. A process that raced us between
      // the two steps makes one of them busy, and we refuse.
      if (!tryBegin(db)) throw inUse(dbPath, db);
      db.exec("ROLLBACK");
      try {
        db.transaction(() => {
          db.exec("DELETE FROM holder");
          db.prepare("INSERT INTO holder (pid, host, started_at) VALUES (?, ?, ?)").run(
            process.pid,
            hostname(),
            Date.now(),
          );
        })();
      } catch (err) {
        if (isBusy(err)) throw inUse(dbPath, db);
        throw err;
      }
      if (!tryBegin(db)) throw inUse(dbPath, db);
      return new DatabaseLock(path, db);
    } catch (err) {
      db.close();
      if (isUnreadableDatabase(err)) throw new DatabaseLockDamagedError(path, err);
      throw err;
    }
  }

  release(): void {
    const db = this.#db;
    this.#db = undefined;
    if (!db) return;
    HELD_HERE.delete(this.#realPath);
    try {
      db.exec("ROLLBACK");
    } finally {
      db.close();
    }
  }
}

function tryBegin(db: Database.Database): boolean {
  try {
    db.exec("BEGIN IMMEDIATE");
    return true;
  } catch (err) {
    if (isBusy(err)) return false;
    throw err;
  }
}

function isBusy(err: unknown): boolean {
  const code = (err as { code?: unknown }).code;
  return code === "SQLITE_BUSY" || code === "SQLITE_LOCKED";
}

/**
 * The lock file beside a database is no SQLite file (damaged, or overwritten): it cannot say
 * whether a host holds the database. The database itself was not opened: told apart from a
 * damaged database, so nobody restores a backup over a sound one.
 */
export class DatabaseLockDamagedError extends Error {
  override readonly name = "DatabaseLockDamagedError";

  constructor(
    readonly lockPath: string,
    cause: unknown,
  ) {
    super(
      `the lock file ${lockPath} is damaged (${cause instanceof Error ? cause.message : String(cause)})`,
      {
        cause,
      },
    );
  }
}

/** The lock of a database file is held by another process (or another store in this one). */
export class DatabaseInUseError extends Error {
  override readonly name = "DatabaseInUseError";
}

function inUse(dbPath: string, db: Database.Database): DatabaseInUseError {
  if (lockedInThisProcess(dbPath)) {
    return new DatabaseInUseError(
      `the database ${dbPath} is already open in this process (another store holds its lock); close that store first (one host per database file)`,
    );
  }
  let holder: Holder | undefined;
  try {
    holder = db.prepare("SELECT pid, host, started_at FROM holder").get() as Holder | undefined;
  } catch {
    holder = undefined;
  }
  const who =
    holder && holder.pid !== process.pid
      ? `process ${holder.pid} on ${holder.host}, started ${new Date(holder.started_at).toISOString()}`
      : "another process";
  return new DatabaseInUseError(
    `the database ${dbPath} is in use by ${who}; stop that host first (one host per database file)`,
  );
}
