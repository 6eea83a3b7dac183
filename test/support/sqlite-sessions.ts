import Database from "better-sqlite3";
import { expect } from "vitest";
import { SqliteSessionStore } from "../../src/store/sqlite-store.js";

/** A sessionmux database at `path` (created when missing) holding the sessions `ids`, closed. */
export async function databaseWith(path: string, ids: string[]): Promise<void> {
  const store = SqliteSessionStore.open(path);
  for (const sessionId of ids) await store.create({ sessionId, owner: "admin", model: "demo-fast" });
  await store.close();
}

/**
 * The sessions of the database at `path`, after SQLite found it whole. `readonly` opens it so;
 * else it is opened as a host would, so SQLite may first recover what a killed writer left.
 */
export function sessionIds(path: string, options: { readonly: boolean }): string[] {
  const db = new Database(path, { readonly: options.readonly, fileMustExist: true });
  try {
    expect(db.pragma("integrity_check", { simple: true })).toBe("ok");
    return (
      db.prepare("SELECT session_id FROM sessions ORDER BY session_id").all() as { session_id: string }[]
    ).map((row) => row.session_id);
  } finally {
    db.close();
  }
}
