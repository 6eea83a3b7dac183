import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { migrate, SCHEMA_VERSION } from "../../src/store/migrations.js";
import { SqliteSessionStore } from "../../src/store/sqlite-store.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { UNDO_LOG_KEYS } from "../support/purge-migration.js";
import { tempDir } from "../support/temp-dir.js";

/**
 * The SQLite schema's versioning beyond what each migration does: a file from a newer build is
 * refused untouched, each migration commits on its own (one that fails leaves the file at the
 * version before it), and a file another connection migrated meanwhile is not migrated twice.
 */
const cleanups = cleanupsAfterEach();

function dbFile(): string {
  const dir = tempDir("sessionmux-migrations-");
  cleanups.push(() => dir.remove());
  return dir.file("sessions.db");
}

function raw(path: string, options?: Database.Options): Database.Database {
  const db = new Database(path, options);
  cleanups.push(() => {
    db.close();
  });
  return db;
}

function openRefusal(path: string): Error {
  try {
    SqliteSessionStore.open(path).close();
  } catch (err) {
    return err as Error;
  }
  throw new Error("the open must throw");
}

const version = (db: Database.Database) => db.pragma("user_version", { simple: true });
const objects = (db: Database.Database, ...names: string[]) =>
  db
    .prepare(
      `SELECT name FROM sqlite_master WHERE name IN (${names.map(() => "?").join(", ")}) ORDER BY name`,
    )
    .all(...names)
    .map((row) => (row as { name: string }).name);

describe("SQLite schema migrations", () => {
  it("a file written by a newer build is refused, names both versions, and is left as it was", async () => {
    const path = dbFile();
    const store = SqliteSessionStore.open(path);
    await store.create({ sessionId: "s", owner: "alice", model: "m" });
    await store.close();
    const newer = new Database(path);
    newer.pragma(`user_version = ${SCHEMA_VERSION + 1}`);
    newer.close();

    const refusal = openRefusal(path);
    expect(refusal.message).toBe(
      `database schema version ${SCHEMA_VERSION + 1} is newer than this build (${SCHEMA_VERSION}); upgrade`,
    );
    // refused again the same way: nothing was rewritten, and the first refusal freed the file's lock
    expect(openRefusal(path).message).toBe(refusal.message);
    const db = raw(path, { readonly: true });
    expect(version(db)).toBe(SCHEMA_VERSION + 1);
    expect(db.prepare("SELECT session_id FROM sessions").all()).toEqual([{ session_id: "s" }]);
  });

  it("each migration commits on its own: one that fails leaves the file at the version before it, and the next open goes on from there", async () => {
    const path = dbFile();
    await SqliteSessionStore.open(path).close();
    // the file as version 3 left it (migration 9 only drops a table, so it is there again) ...
    const old = new Database(path);
    old.exec(UNDO_LOG_KEYS);
    old.exec(
      "DROP TABLE dismissals; DROP TRIGGER attachment_chunks_follow; DROP TABLE attachment_chunks; " +
        "DROP INDEX events_large; DROP TRIGGER attachments_counted; DROP TRIGGER attachments_uncounted; " +
        "DROP TABLE owner_usage; ALTER TABLE projections DROP COLUMN pending_interactions",
    );
    old.pragma("user_version = 3");
    // ... with a body stored whole, and an object in the way of migration 5's second statement
    old
      .prepare(
        "INSERT INTO attachments (attachment_id, owner, session_id, name, type, size, bytes, created_at) VALUES ('a', 'o', NULL, 'n', 't', 3, x'010203', 1)",
      )
      .run();
    old.exec("CREATE TRIGGER attachment_chunks_follow AFTER DELETE ON attachments BEGIN SELECT 1; END");
    old.close();

    expect(openRefusal(path).message).toMatch(/attachment_chunks_follow already exists/);
    const db = raw(path);
    // migration 4 stays applied; of migration 5 nothing is: not its table, not the split body
    expect(version(db)).toBe(4);
    expect(objects(db, "dismissals", "attachment_chunks")).toEqual(["dismissals"]);
    expect(db.prepare("SELECT hex(bytes) AS bytes FROM attachments").all()).toEqual([{ bytes: "010203" }]);

    db.exec("DROP TRIGGER attachment_chunks_follow");
    const store = SqliteSessionStore.open(path);
    cleanups.push(() => store.close());
    expect((await store.getAttachment("a"))?.bytes).toEqual(new Uint8Array([1, 2, 3]));
    expect(version(db)).toBe(SCHEMA_VERSION);
    expect(objects(db, "attachment_chunks", "owner_usage")).toEqual(["attachment_chunks", "owner_usage"]);
  });

  it("a file another connection migrated after this one looked is not migrated again", () => {
    const path = dbFile();
    const mine = raw(path);
    mine.pragma("journal_mode = WAL");
    const other = raw(path);
    // Another process can migrate between this connection's first look at the version and its
    // write lock; the other connection here does so at exactly that point, as the first
    // migration's transaction is about to begin.
    const transaction = mine.transaction.bind(mine);
    let looked = false;
    mine.transaction = ((fn: () => void) => {
      if (!looked) {
        looked = true;
        expect(version(mine)).toBe(0);
        migrate(other);
      }
      return transaction(fn);
    }) as typeof mine.transaction;

    migrate(mine);
    expect(looked).toBe(true);
    expect(version(mine)).toBe(SCHEMA_VERSION);
    expect(objects(mine, "dismissals", "live_owners")).toEqual(["dismissals"]);
  });
});
