import { existsSync, linkSync, rmSync } from "node:fs";
import { dirname } from "node:path";
import Database from "better-sqlite3";
import { isUnreadableDatabase } from "../store/io-errors.js";
import { existingDatabase } from "./database-path.js";
import { syncFolder } from "./durable-files.js";
import { partialName, removeStalePartials } from "./stale-partials.js";
import { StartupError } from "./startup-error.js";

export interface BackupReport {
  source: string;
  target: string;
  pages: number;
  /** `PRAGMA integrity_check` of the copy: always `"ok"` (a copy that fails it is no backup). */
  integrity: string;
}

export interface BackupOptions {
  /** Runs on the finished copy before its integrity check (tests damage it there). */
  beforeCheck?: (copyPath: string) => void;
}

/**
 * An online, consistent copy of a live database with SQLite's backup API. The source is opened
 * read-only: in WAL mode a reader never blocks the host's writer, and the copy is the database as
 * of one read transaction. All pages go in one step, because a step that lets another connection
 * write in between restarts the backup, which under steady writes would never finish. The copy is
 * written beside the target and linked into place once complete (the folder synced after the
 * link, so a reported backup survives a power cut), so `targetPath` is either absent or a whole
 * copy: a failed backup (a full disk) removes what it wrote, and a killed one
 * leaves only `<target>.<pid>.partial`, which the next backup into that folder removes once that
 * process is gone. A copy that fails `PRAGMA integrity_check` is removed
 * too and refused `backup_corrupt`, never put in place.
 */
export async function backupDatabase(
  sourcePath: string,
  targetPath: string,
  options: BackupOptions = {},
): Promise<BackupReport> {
  const source = existingDatabase(sourcePath);
  if (existsSync(targetPath)) throw targetExists(targetPath);
  // a backup killed mid-way (kill -9, a power cut) left its copy under its temporary name
  removeStalePartials(dirname(targetPath), "partial");
  const partial = partialName(targetPath, "partial");
  try {
    const pages = await copyPages(source, partial);
    options.beforeCheck?.(partial);
    const integrity = integrityOf(partial);
    // a copy that fails its check is no backup: restoring it would lose or garble sessions
    if (integrity !== "ok")
      throw new StartupError(
        "backup_corrupt",
        `the copy of ${source} failed its integrity check (${integrity}); nothing was written to ${targetPath}`,
      );
    try {
      linkSync(partial, targetPath);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "EEXIST") throw targetExists(targetPath);
      throw err;
    }
    // SQLite synced the copy's pages; the link naming it is an entry of its folder
    try {
      syncFolder(dirname(targetPath));
    } catch (err) {
      // not known to be durable: not reported as a backup
      rmSync(targetPath, { force: true });
      throw err;
    }
    return { source, target: targetPath, pages, integrity };
  } catch (err) {
    if (err instanceof StartupError) throw err;
    const reason = err instanceof Error ? err.message : String(err);
    throw new StartupError(
      "backup_failed",
      `backup to ${targetPath} failed (${reason}); nothing was written to ${targetPath}`,
      { cause: err },
    );
  } finally {
    // the check's read-only connection leaves the (empty) WAL and its index beside the copy
    for (const file of [partial, `${partial}-wal`, `${partial}-shm`]) rmSync(file, { force: true });
  }
}

async function copyPages(source: string, target: string): Promise<number> {
  const db = new Database(source, { readonly: true, fileMustExist: true });
  try {
    const result = await db.backup(target, {
      progress: ({ totalPages }) => Math.max(totalPages, 1),
    });
    return result.totalPages;
  } finally {
    db.close();
  }
}

/**
 * `PRAGMA integrity_check` of the copy: `"ok"` or the first problem found. A copy damaged enough
 * that SQLite refuses to read it (`SQLITE_CORRUPT`, `SQLITE_NOTADB`) fails the check with its
 * words; any other error (a read that failed) is no verdict on the copy and is thrown.
 */
function integrityOf(path: string): string {
  try {
    const copy = new Database(path, { readonly: true, fileMustExist: true });
    try {
      return copy.pragma("integrity_check", { simple: true }) as string;
    } finally {
      copy.close();
    }
  } catch (err) {
    if (isUnreadableDatabase(err)) return (err as Error).message;
    throw err;
  }
}

function targetExists(targetPath: string): StartupError {
  return new StartupError(
    "backup_target_exists",
    `${targetPath} already exists; remove it or pick another file`,
  );
}
