import Database from "better-sqlite3";
import { DatabaseInUseError, DatabaseLockDamagedError, lockedInThisProcess } from "../store/database-lock.js";
import { keepingWal } from "../store/kept-wal.js";
import { existingDatabase } from "./database-path.js";
import { StartupError } from "./startup-error.js";

/**
 * Refuses when another process has the database open (a live host). A connection in exclusive
 * locking mode can begin an exclusive transaction on a WAL database only when no other connection
 * has it open; SQLite's own locks say so, so a crashed host leaves nothing stale behind.
 */
export function assertNotInUse(path: string): string {
  const file = existingDatabase(path);
  return keepingWal(file, () => lockedAlone(file));
}

function lockedAlone(file: string): string {
  const db = new Database(file, { fileMustExist: true, timeout: 0 });
  try {
    db.pragma("locking_mode = EXCLUSIVE");
    db.exec("BEGIN EXCLUSIVE");
    db.exec("ROLLBACK");
  } catch (err) {
    if ((err as { code?: string }).code === "SQLITE_BUSY") {
      // a store of this very process holds it: "another process" would send its caller looking for
      // a host that does not exist
      const where = lockedInThisProcess(file)
        ? "already open in this process (a store of it is open); close that store first"
        : "open in another process (a running host?); stop it first";
      throw new StartupError("db_in_use", `database ${file} is ${where}`, { cause: err });
    }
    throw err;
  } finally {
    db.close();
  }
  return file;
}

/**
 * The store's own lock refusing the file (a host took it, maybe since `assertNotInUse` looked) as
 * the same `db_in_use` refusal; undefined for any other failure.
 */
export function inUseRefusal(err: unknown): StartupError | undefined {
  return err instanceof DatabaseInUseError
    ? new StartupError("db_in_use", err.message, { cause: err })
    : undefined;
}

/**
 * The lock file beside `file` found damaged, as a refusal saying what to do: the file records
 * only which process runs a host on the database, so once none does it can go. Undefined for any
 * other failure.
 */
export function damagedLockRefusal(file: string, err: unknown): StartupError | undefined {
  if (!(err instanceof DatabaseLockDamagedError)) return undefined;
  return new StartupError(
    "db_lock_damaged",
    `${err.message}; database ${file} itself was not opened. The lock file only records which ` +
      `process runs a host on the database: when no sessionmux process uses ${file}, remove ` +
      `${err.lockPath} and start again`,
    { cause: err },
  );
}
