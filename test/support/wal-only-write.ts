import { copyFileSync, readFileSync, writeFileSync } from "node:fs";
import Database from "better-sqlite3";
import { SqliteSessionStore } from "../../src/store/sqlite-store.js";
import type { tempDir } from "./temp-dir.js";

/** What the write only the WAL holds put in the `notes` table. */
export const WAL_ONLY_NOTE = "only in the WAL";

/**
 * A sessionmux database at `<dir>/<name>` (holding session `old1`) whose newest write lives only in
 * its `-wal`, copied while the writer had it open, as a crash leaves it. The write changes no
 * schema, so the WAL holds no copy of the file's first page: damaging that page (`damageHeader`)
 * leaves a file SQLite cannot read, and a WAL it cannot fold.
 */
export async function databaseWithWalOnlyWrite(
  dir: ReturnType<typeof tempDir>,
  name: string,
): Promise<string> {
  const live = dir.file(`${name}.live`);
  const store = SqliteSessionStore.open(live);
  await store.create({ sessionId: "old1", owner: "admin", model: "demo-fast" });
  await store.close();
  const setup = new Database(live);
  setup.exec("CREATE TABLE notes (note TEXT)");
  setup.close();
  const writer = new Database(live);
  writer.pragma("wal_autocheckpoint = 0");
  writer.prepare("INSERT INTO notes VALUES (?)").run(WAL_ONLY_NOTE);
  const db = dir.file(name);
  copyFileSync(live, db);
  copyFileSync(`${live}-wal`, `${db}-wal`);
  writer.close();
  return db;
}

/** Overwrites the file's first 16 bytes (SQLite's magic string); `mendHeader` puts them back. */
export function damageHeader(db: string): void {
  const file = readFileSync(db);
  file.write("not a database!!", 0, "latin1");
  writeFileSync(db, file);
}

export function mendHeader(db: string): void {
  const file = readFileSync(db);
  file.write("SQLite format 3\0", 0, "latin1");
  writeFileSync(db, file);
}

/** The notes the database holds, its WAL included. */
export function walNotes(db: string): unknown[] {
  const conn = new Database(db, { readonly: true });
  try {
    return conn.prepare("SELECT note FROM notes").pluck().all();
  } finally {
    conn.close();
  }
}
