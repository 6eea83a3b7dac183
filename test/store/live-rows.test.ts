import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { SCHEMA_VERSION } from "../../src/store/migrations.js";
import { SqliteSessionStore } from "../../src/store/sqlite-store.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { UNDO_LOG_KEYS } from "../support/purge-migration.js";
import { openTempStore } from "./open-store.js";

/** The SQLite live-state rows beyond the store contract: older files' owner rows, and a page over damaged rows. */

const cleanups = cleanupsAfterEach();

function tempStore(): ReturnType<typeof openTempStore> {
  const opened = openTempStore();
  cleanups.push(() => opened.dispose());
  return opened;
}

/** The migration that drops the live state's owner rows. */
const LIVE_OWNERS_DROPPED = 9;

describe("the live state's owner rows of older files", () => {
  it("are dropped when the file is upgraded; the queue they named stays", async () => {
    const { store, path } = tempStore();
    await store.create({ sessionId: "queued", owner: "alice", model: "m" });
    await store.enqueuePrompt({ sessionId: "queued", itemId: "q1", queuedAt: 5, input: { text: "one" } });
    await store.close();
    // the file as the last schema with owner rows left it
    const old = new Database(path);
    old.exec(`CREATE TABLE live_owners (session_id TEXT PRIMARY KEY, host_id TEXT NOT NULL,
      generation TEXT NOT NULL, since INTEGER NOT NULL) WITHOUT ROWID;
      INSERT INTO live_owners VALUES ('queued', 'h1', 'g1', 5);
      ${UNDO_LOG_KEYS}
      PRAGMA user_version = ${LIVE_OWNERS_DROPPED - 1}`);
    old.close();

    const reopened = SqliteSessionStore.open(path);
    cleanups.push(() => reopened.close());
    const page = await reopened.liveStatePage(null, 10);
    expect(page.sessions.map((s) => [s.sessionId, s.queue.map((i) => i.itemId)])).toEqual([
      ["queued", ["q1"]],
    ]);
    const db = new Database(path, { readonly: true });
    try {
      expect(db.pragma("user_version", { simple: true })).toBe(SCHEMA_VERSION);
      expect(db.prepare("SELECT name FROM sqlite_master WHERE name = 'live_owners'").all()).toEqual([]);
    } finally {
      db.close();
    }
  });
});

describe("a live state page over a damaged file", () => {
  it("skips a queued prompt whose session has no projection and lists the others", async () => {
    const { store, path } = tempStore();
    for (const sessionId of ["a", "orphan", "z"]) {
      await store.create({ sessionId, owner: "alice", model: "m" });
      await store.enqueuePrompt({ sessionId, itemId: "q", queuedAt: 1, input: { text: sessionId } });
    }
    await store.close();
    // what a file edited by hand (or an old bug) can hold: queue rows of a session without its projection
    const db = new Database(path);
    db.prepare("DELETE FROM projections WHERE session_id = 'orphan'").run();
    db.close();

    const reopened = SqliteSessionStore.open(path);
    cleanups.push(() => reopened.close());
    const page = await reopened.liveStatePage(null, 10);

    expect(page.sessions.map((s) => [s.sessionId, s.queue.map((i) => i.input.text)])).toEqual([
      ["a", ["a"]],
      ["z", ["z"]],
    ]);
  });
});
