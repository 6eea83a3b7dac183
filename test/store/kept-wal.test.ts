import { copyFileSync, existsSync, readdirSync, readFileSync } from "node:fs";
import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { openSqliteStoreAlone } from "../../src/operations/sqlite-store-alone.js";
import { StartupError } from "../../src/operations/startup-error.js";
import { keepingWal } from "../../src/store/kept-wal.js";
import { SqliteSessionStore } from "../../src/store/sqlite-store.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { tempDir } from "../support/temp-dir.js";
import {
  damageHeader,
  databaseWithWalOnlyWrite,
  mendHeader,
  WAL_ONLY_NOTE,
  walNotes,
} from "../support/wal-only-write.js";

/**
 * SQLite removes a database's `-wal` when the last connection closes, also one that could not
 * read the file: a host refusing to start on a damaged database, or `migrate` refusing it, would
 * take the newest commits with it. Each leaves the WAL where it was.
 */

const cleanups = cleanupsAfterEach();

async function damagedWithWal(): Promise<{ dir: ReturnType<typeof tempDir>; db: string; wal: Buffer }> {
  const dir = tempDir();
  cleanups.push(() => dir.remove());
  const db = await databaseWithWalOnlyWrite(dir, "sessions.db");
  damageHeader(db);
  return { dir, db, wal: readFileSync(`${db}-wal`) };
}

const thrown = (run: () => unknown): unknown => {
  try {
    run();
  } catch (err) {
    return err;
  }
  throw new Error("it did not throw");
};

describe("a damaged database's write-ahead log", () => {
  it("stays when the store refuses to open the file (a host's start)", async () => {
    const { dir, db, wal } = await damagedWithWal();

    const err = thrown(() => SqliteSessionStore.open(db));

    expect((err as { code?: string }).code).toBe("SQLITE_NOTADB");
    expect(readFileSync(`${db}-wal`).equals(wal)).toBe(true);
    expect(readdirSync(dir.path).filter((name) => name.includes(".kept"))).toEqual([]);
    mendHeader(db);
    expect(walNotes(db)).toEqual([WAL_ONLY_NOTE]);
  });

  it("stays when a command that works on the file alone refuses it (migrate, rebuild-projections)", async () => {
    const { db, wal } = await damagedWithWal();

    const err = thrown(() => openSqliteStoreAlone(db));

    expect(err).toBeInstanceOf(StartupError);
    expect((err as StartupError).code).toBe("db_unreadable");
    expect(readFileSync(`${db}-wal`).equals(wal)).toBe(true);
    mendHeader(db);
    expect(walNotes(db)).toEqual([WAL_ONLY_NOTE]);
  });

  it("is folded and gone once a sound database opens, with no copy left", async () => {
    const dir = tempDir();
    cleanups.push(() => dir.remove());
    const db = await databaseWithWalOnlyWrite(dir, "sessions.db");

    const store = SqliteSessionStore.open(db);
    await store.close();

    expect(existsSync(`${db}-wal`)).toBe(false);
    expect(readdirSync(dir.path).filter((name) => name.includes(".kept"))).toEqual([]);
    expect(walNotes(db)).toEqual([WAL_ONLY_NOTE]);
  });

  it("is not put back once the open read the file: a migration committed and a later one refused leaves a sound file", async () => {
    const dir = tempDir();
    cleanups.push(() => dir.remove());
    const live = dir.file("live.db");
    await SqliteSessionStore.open(live).close();
    // as an older build left it: migration 9 drops a table of many pages, and an object named as
    // the index migration 10 creates makes that one fail
    const raw = new Database(live);
    raw.exec("CREATE TABLE live_owners (k INTEGER PRIMARY KEY, v TEXT)");
    const insert = raw.prepare("INSERT INTO live_owners (v) VALUES (?)");
    raw.transaction(() => {
      for (let i = 0; i < 2000; i++) insert.run("x".repeat(200));
    })();
    raw.exec("DROP INDEX dismissals_by_session; CREATE TABLE dismissals_by_session (x)");
    raw.pragma("wal_checkpoint(TRUNCATE)");
    raw.pragma("wal_autocheckpoint = 0");
    // its newest commit only in the WAL, as a crash leaves it
    raw.pragma("user_version = 8");
    const db = dir.file("sessions.db");
    copyFileSync(live, db);
    copyFileSync(`${live}-wal`, `${db}-wal`);
    raw.close();

    expect(() => SqliteSessionStore.open(db)).toThrow(/dismissals_by_session/);

    const after = new Database(db, { readonly: true });
    try {
      expect(after.pragma("integrity_check", { simple: true })).toBe("ok");
      expect(after.pragma("user_version", { simple: true })).toBe(9);
      expect(after.prepare("SELECT name FROM sqlite_schema WHERE name = 'live_owners'").all()).toEqual([]);
    } finally {
      after.close();
    }
    expect(readdirSync(dir.path).filter((name) => name.includes(".kept"))).toEqual([]);
  });

  it("is never put back over a WAL another connection still writes", async () => {
    const dir = tempDir();
    cleanups.push(() => dir.remove());
    const db = await databaseWithWalOnlyWrite(dir, "sessions.db");
    const other = new Database(db);
    cleanups.push(() => void other.close());
    other.pragma("wal_autocheckpoint = 0");

    expect(() =>
      keepingWal(db, () => {
        other.prepare("INSERT INTO notes VALUES (?)").run("written meanwhile");
        throw new Error("refused");
      }),
    ).toThrow("refused");

    expect(readdirSync(dir.path).filter((name) => name.includes(".kept"))).toEqual([]);
    expect(walNotes(db)).toEqual([WAL_ONLY_NOTE, "written meanwhile"]);
  });
});
