import { existsSync } from "node:fs";
import Database from "better-sqlite3";
import { existingDatabase } from "./database-path.js";
import { StartupError } from "./startup-error.js";

export interface BackupReport {
  source: string;
  target: string;
  pages: number;
  /** `PRAGMA integrity_check` of the copy: `"ok"` or the first problem found. */
  integrity: string;
}

/**
 * An online, consistent copy of a live database with SQLite's backup API. The source is opened
 * read-only: in WAL mode a reader never blocks the host's writer, and the copy is the database as
 * of one read transaction. All pages go in one step, because a step that lets another connection
 * write in between restarts the backup, which under steady writes would never finish.
 */
export async function backupDatabase(sourcePath: string, targetPath: string): Promise<BackupReport> {
  const source = existingDatabase(sourcePath);
  if (existsSync(targetPath)) {
    throw new StartupError(
      "backup_target_exists",
      `${targetPath} already exists; remove it or pick another file`,
    );
  }
  const db = new Database(source, { readonly: true, fileMustExist: true });
  let pages = 0;
  try {
    const result = await db.backup(targetPath, {
      progress: ({ totalPages }) => {
        pages = totalPages;
        return Math.max(totalPages, 1);
      },
    });
    pages = result.totalPages;
  } finally {
    db.close();
  }
  const copy = new Database(targetPath, { readonly: true, fileMustExist: true });
  try {
    const integrity = copy.pragma("integrity_check", { simple: true }) as string;
    return { source, target: targetPath, pages, integrity };
  } finally {
    copy.close();
  }
}
