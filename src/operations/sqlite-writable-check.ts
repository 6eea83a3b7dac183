import Database from "better-sqlite3";

/**
 * A check that the database file takes a write lock: its own connection runs
 * `BEGIN IMMEDIATE; ROLLBACK`, which needs the file writable and the write lock obtainable within
 * `timeoutMs` (short: the wait blocks the event loop), and writes nothing.
 */
export function sqliteWritableCheck(path: string, timeoutMs = 200): { check(): void; close(): void } {
  const db = new Database(path, { fileMustExist: true, timeout: timeoutMs });
  const begin = db.prepare("BEGIN IMMEDIATE");
  const rollback = db.prepare("ROLLBACK");
  return {
    check() {
      begin.run();
      rollback.run();
    },
    close() {
      db.close();
    },
  };
}
