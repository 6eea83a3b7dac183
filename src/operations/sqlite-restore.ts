import { copyFileSync, existsSync, linkSync, renameSync, rmSync, statSync } from "node:fs";
import { dirname, resolve } from "node:path";
import Database from "better-sqlite3";
import { DatabaseLock } from "../store/database-lock.js";
import { isUnreadableDatabase } from "../store/io-errors.js";
import { holdsFrames, keepingWal } from "../store/kept-wal.js";
import { prepareDatabasePath } from "./database-path.js";
import { syncFile, syncFolder } from "./durable-files.js";
import { assertNotInUse, damagedLockRefusal, inUseRefusal } from "./exclusive-access.js";
import { checkRestorableCopy } from "./restorable-backup.js";
import { partialName, removeStalePartials } from "./stale-partials.js";
import { StartupError } from "./startup-error.js";

export interface RestoreReport {
  backup: string;
  db: string;
  schemaVersion: number;
  /** Where the database that was replaced now is; null when there was none or it was not kept. */
  replaced: string | null;
}

export interface RestoreOptions {
  /** Keep the replaced database beside it, as `<db>.replaced-<time>`. @default true */
  keepReplaced?: boolean;
  /** The time in the kept file's name. @default Date.now */
  now?: () => number;
}

/**
 * Puts the backup at `dbPath`, so that the path names the old database or the new one, whole,
 * whenever the process stops. The backup is copied beside the database, synced and checked
 * (`checkRestorableCopy`) before the database is touched; then, holding the host's lock (no host
 * starts meanwhile) and with no other connection open, the old database's WAL is checkpointed
 * into its file (a WAL left beside the new file would be replayed into it), the old file is
 * linked aside, the copy renamed over it and the folder synced. A killed restore leaves at most
 * `<db>.<pid>.restoring`, which the next restore, or the host's next start, removes.
 */
export function restoreDatabase(
  backupPath: string,
  dbPath: string,
  options: RestoreOptions = {},
): RestoreReport {
  const backup = resolve(backupPath);
  if (!existsSync(backup) || !statSync(backup).isFile()) {
    throw new StartupError("restore_backup_missing", `no backup file at ${backup}; check the path`);
  }
  if (holdsFrames(`${backup}-wal`)) {
    throw new StartupError(
      "restore_backup_invalid",
      `${backup} has a -wal file beside it holding changes its file lacks (a copy of a live ` +
        "database, not a backup); restore a file sessionmux backup wrote",
    );
  }
  const db = prepareDatabasePath(dbPath);
  const folder = dirname(db);
  removeStalePartials(folder, "restoring");
  const copy = partialName(db, "restoring");
  let placed = false;
  let replaced: string | null = null;
  try {
    copySynced(backup, copy);
    const schemaVersion = checkRestorableCopy(copy, backup);
    const lock = takeLock(db);
    try {
      replaced = existsSync(db) ? setAside(db, options) : null;
      // the old database's WAL (no frames left in it) and its index: no connection has them open,
      // and none can start while the lock is held
      for (const file of [`${db}-wal`, `${db}-shm`]) rmSync(file, { force: true });
      renameSync(copy, db);
      placed = true;
      syncFolder(folder);
      return { backup, db, schemaVersion, replaced };
    } finally {
      lock.release();
    }
  } catch (err) {
    // the old database is still at its path: a second name for it is no copy worth keeping
    if (!placed && replaced) rmSync(replaced, { force: true });
    if (err instanceof StartupError) throw err;
    const reason = err instanceof Error ? err.message : String(err);
    const outcome = placed
      ? `the backup is at ${db}, but a power cut could still bring back the database it replaced; ` +
        "run sync before starting the host"
      : `${db} is as it was before`;
    throw new StartupError("restore_failed", `restore of ${backup} to ${db} failed (${reason}); ${outcome}`, {
      cause: err,
    });
  } finally {
    rmSync(copy, { force: true });
  }
}

function copySynced(from: string, to: string): void {
  copyFileSync(from, to);
  syncFile(to);
}

/**
 * The host's own lock, then a check that nothing else (a reader, a backup) has the file open. A
 * file SQLite cannot read as a database (damaged: the reason to restore) has no reader to wait
 * for; the lock keeps hosts away from it.
 */
function takeLock(db: string): DatabaseLock {
  let lock: DatabaseLock;
  try {
    lock = DatabaseLock.acquire(db);
  } catch (err) {
    throw inUseRefusal(err) ?? damagedLockRefusal(db, err) ?? err;
  }
  try {
    if (existsSync(db)) assertNotInUse(db);
    return lock;
  } catch (err) {
    if (isUnreadableDatabase(err)) return lock;
    lock.release();
    throw err;
  }
}

/**
 * Folds the old database's WAL into its file, then links the file aside (or not, when it is not
 * to be kept). Once the WAL is folded the file alone is the old database, so every later step
 * leaves the path naming a whole one.
 */
function setAside(db: string, options: RestoreOptions): string | null {
  if (holdsFrames(`${db}-wal`)) checkpoint(db);
  if (options.keepReplaced === false) return null;
  const aside = `${db}.replaced-${stamp((options.now ?? Date.now)())}`;
  linkSync(db, aside);
  return aside;
}

/**
 * `wal_checkpoint(TRUNCATE)` on a connection of its own; closing the last connection removes the
 * WAL. One that cannot be folded (the file damaged) is refused, its WAL left where it was (see
 * `keepingWal`): removing it would lose what it holds, and leaving it would replay it into the
 * restored file.
 */
function checkpoint(db: string): void {
  keepingWal(db, () => fold(db));
}

function fold(db: string): void {
  let conn: Database.Database;
  try {
    conn = new Database(db, { fileMustExist: true, timeout: 0 });
  } catch (err) {
    throw unreadable(db, err);
  }
  try {
    const [result] = conn.pragma("wal_checkpoint(TRUNCATE)") as { busy: number }[];
    if (result && result.busy !== 0) throw new Error("the checkpoint was blocked by a reader");
  } catch (err) {
    throw unreadable(db, err);
  } finally {
    conn.close();
  }
  if (holdsFrames(`${db}-wal`)) throw unreadable(db, new Error("its WAL is still there after a checkpoint"));
}

function unreadable(db: string, err: unknown): StartupError {
  const reason = err instanceof Error ? err.message : String(err);
  return new StartupError(
    "restore_failed",
    `cannot fold the write-ahead log of ${db} into it (${reason}), so it could not be kept; ` +
      `move ${db} and its -wal aside by hand and restore again. Nothing was changed`,
    { cause: err },
  );
}

/** `20261206T183000123Z`: sorts by time and is valid in a file name everywhere. */
function stamp(ms: number): string {
  return new Date(ms).toISOString().replace(/[-:.]/g, "");
}
