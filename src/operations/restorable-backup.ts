import { rmSync } from "node:fs";
import Database from "better-sqlite3";
import { isUnreadableDatabase } from "../store/io-errors.js";
import { SCHEMA_VERSION, schemaVersionOf } from "../store/migrations.js";
import { StartupError } from "./startup-error.js";

/** Tables every sessionmux database has had since its first schema version. */
const SESSIONMUX_TABLES = ["sessions", "events", "projections", "tombstones"];

/**
 * Checks that `copy` (the backup, already copied beside the database it is to replace) is a
 * sessionmux database this build can open: SQLite reads it, `PRAGMA integrity_check` passes, it
 * has the store's tables, and its schema version is not newer than this build's migrations (a
 * host would refuse to start on it). `backup` names the file as the user gave it. Returns the
 * schema version; the copy is left closed, without a `-wal` or `-shm` of its own.
 */
export function checkRestorableCopy(copy: string, backup: string): number {
  try {
    const db = openReadOnly(copy, backup);
    try {
      const integrity = readOrRefuse(backup, () => db.pragma("integrity_check", { simple: true }));
      if (integrity !== "ok") {
        throw new StartupError(
          "restore_backup_invalid",
          `${backup} failed its integrity check (${String(integrity)}); pick another backup`,
        );
      }
      const tables = new Set(
        (db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all() as { name: string }[]).map(
          (row) => row.name,
        ),
      );
      const version = schemaVersionOf(db);
      const missing = SESSIONMUX_TABLES.filter((table) => !tables.has(table));
      if (version < 1 || missing.length > 0) {
        throw new StartupError(
          "restore_backup_invalid",
          `${backup} is no sessionmux database (schema version ${version}` +
            `${missing.length > 0 ? `, no table ${missing.join(", ")}` : ""}); pick a file sessionmux backup wrote`,
        );
      }
      if (version > SCHEMA_VERSION) {
        throw new StartupError(
          "restore_backup_newer",
          `${backup} has schema version ${version}, newer than this build (${SCHEMA_VERSION}); ` +
            "restore it with the sessionmux version that wrote it, or a newer one",
        );
      }
      return version;
    } finally {
      db.close();
    }
  } finally {
    // a read-only connection to a WAL database leaves an empty WAL and its index beside it
    for (const file of [`${copy}-wal`, `${copy}-shm`]) rmSync(file, { force: true });
  }
}

function openReadOnly(copy: string, backup: string): Database.Database {
  return readOrRefuse(backup, () => new Database(copy, { readonly: true, fileMustExist: true }));
}

/** A file SQLite cannot read as a database is refused with its words; any other error is thrown. */
function readOrRefuse<T>(backup: string, read: () => T): T {
  try {
    return read();
  } catch (err) {
    if (isUnreadableDatabase(err)) {
      throw new StartupError(
        "restore_backup_invalid",
        `${backup} is not a database SQLite can read (${(err as Error).message}); pick another backup`,
        { cause: err },
      );
    }
    throw err;
  }
}
