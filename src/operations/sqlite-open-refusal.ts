import { accessSync, constants, existsSync } from "node:fs";
import { isWriteRefused } from "../store/io-errors.js";
import { damagedLockRefusal } from "./exclusive-access.js";
import { StartupError } from "./startup-error.js";

const NO_ROOM = new Set([
  "SQLITE_FULL",
  "SQLITE_IOERR_WRITE",
  "SQLITE_IOERR_FSYNC",
  "SQLITE_IOERR_DIR_FSYNC",
]);

function allowed(file: string, mode: number): boolean {
  try {
    accessSync(file, mode);
    return true;
  } catch {
    return false;
  }
}

const readable = (file: string): boolean => allowed(file, constants.R_OK);

/**
 * Why SQLite could not open the database (a host's, or a command's: migrate, rebuild-projections),
 * said so that an operator knows where to look:
 * `db_unwritable` when the file cannot be written (no room on its disk, a read-only file, folder
 * or file system: opening writes the WAL, its index and the lock file beside it), `db_unreadable`
 * when it cannot be read (damaged, not a database, or not readable by this user), and
 * `db_lock_damaged` when the lock file beside it is damaged (the database was not opened).
 */
export function sqliteOpenRefusal(file: string, err: unknown): StartupError {
  const damagedLock = damagedLockRefusal(file, err);
  if (damagedLock) return damagedLock;
  const reason = err instanceof Error ? err.message : String(err);
  const code = (err as { code?: unknown } | null)?.code;
  // SQLite could not open a file: creating it (the folder refused), or reading it
  const cantOpen = code === "SQLITE_CANTOPEN" && !(existsSync(file) && !readable(file));
  // SQLite opens a file this user may not write (or one on a read-only file system) for reading
  // alone, and an exclusive lock on it then fails as an I/O error
  const lockedReadOnly = code === "SQLITE_IOERR_LOCK" && !allowed(file, constants.W_OK);
  if (isWriteRefused(err) || cantOpen || lockedReadOnly) {
    const check = NO_ROOM.has(code as string)
      ? "check that its disk has room (and that no file size limit, ulimit -f, applies)"
      : "check that the file, the -wal, -shm and .lock files beside it and its folder are writable by this user, and that its file system is not mounted read-only";
    return new StartupError("db_unwritable", `cannot write database ${file}: ${reason}; ${check}`, {
      cause: err,
    });
  }
  const check =
    existsSync(file) && !readable(file)
      ? "check that the file is readable by this user"
      : "the file is damaged or not a sessionmux database (sessionmux restore puts a backup in its place)";
  return new StartupError("db_unreadable", `cannot read database ${file}: ${reason}; ${check}`, {
    cause: err,
  });
}
