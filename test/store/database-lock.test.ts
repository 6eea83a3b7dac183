import { readdirSync, readlinkSync, symlinkSync, unlinkSync, writeFileSync } from "node:fs";
import Database from "better-sqlite3";
import { afterEach, describe, expect, it } from "vitest";
import { DatabaseInUseError, DatabaseLock, DatabaseLockDamagedError } from "../../src/store/database-lock.js";
import { SqliteSessionStore } from "../../src/store/sqlite-store.js";
import { tempDir } from "../support/temp-dir.js";
import { type CliHost, spawnCliHost } from "../torture/cli-host.js";

const hosts: CliHost[] = [];
const dirs: { remove(): void }[] = [];
afterEach(async () => {
  for (const host of hosts.splice(0)) await host.kill9();
  for (const dir of dirs.splice(0)) dir.remove();
});

/** Tests that start real `serve` processes (a few seconds each on a loaded machine). */
const SPAWNS_HOSTS_MS = 60_000;

function freshDb(): string {
  const dir = tempDir();
  dirs.push(dir);
  return dir.file("sessions.db");
}

/** What taking (and releasing) the lock of `dbPath` threw; undefined when it was taken. */
function acquireRefusal(dbPath: string): unknown {
  try {
    DatabaseLock.acquire(dbPath).release();
    return undefined;
  } catch (err) {
    return err;
  }
}

describe("one host per SQLite file", () => {
  it(
    "a second host on the same file refuses to start, naming the file and the first host's pid",
    async () => {
      const dbPath = freshDb();
      const first = await spawnCliHost({ dbPath, token: "t" });
      hosts.push(first);
      const refused = spawnCliHost({ dbPath, token: "t" });
      await expect(refused).rejects.toThrow(`the database ${dbPath} is in use by process ${first.child.pid}`);

      // The database itself stays readable (an online backup reads it while the host runs).
      const reader = new Database(dbPath, { readonly: true });
      try {
        expect(reader.prepare("SELECT count(*) AS n FROM sessions").get()).toBeDefined();
      } finally {
        reader.close();
      }

      // kill -9 leaves no stale lock: the operating system released it with the process.
      await first.kill9();
      hosts.push(await spawnCliHost({ dbPath, token: "t" }));
    },
    SPAWNS_HOSTS_MS,
  );

  it("within one process a second open is refused, and closing the store releases the lock", async () => {
    const dbPath = freshDb();
    const store = SqliteSessionStore.open(dbPath);
    // this very process holds it: the refusal says so, not "another process"
    expect(() => SqliteSessionStore.open(dbPath)).toThrow(
      `the database ${dbPath} is already open in this process (another store holds its lock); close that store first`,
    );
    await store.close();
    const again = SqliteSessionStore.open(dbPath);
    await again.close();
    DatabaseLock.acquire(dbPath).release();
  });

  it("a second open in this process through another path to the same file is told it is this process, and a released lock no longer counts", () => {
    const dbPath = freshDb();
    const link = `${dbPath.slice(0, dbPath.lastIndexOf("/"))}-link`;
    symlinkSync(dbPath.slice(0, dbPath.lastIndexOf("/")), link);
    const linked = `${link}/sessions.db`;
    try {
      const held = DatabaseLock.acquire(dbPath);
      expect(() => DatabaseLock.acquire(linked)).toThrow(
        `the database ${linked} is already open in this process`,
      );
      held.release();
      // released: another process holding it now is not called this one
      const other = new Database(`${dbPath}.lock`);
      try {
        other.exec("BEGIN IMMEDIATE");
        expect(() => DatabaseLock.acquire(linked)).toThrow(
          `the database ${linked} is in use by another process`,
        );
      } finally {
        other.close();
      }
    } finally {
      unlinkSync(link);
    }
  });

  it("a lock file another opener holds before its table exists is refused as in use, not as a raw SQLite error", () => {
    const dbPath = freshDb();
    // the moment between another process creating the lock file and writing who it is
    const other = new Database(`${dbPath}.lock`);
    try {
      other.exec("BEGIN IMMEDIATE");
      expect(() => DatabaseLock.acquire(dbPath)).toThrow(
        `the database ${dbPath} is in use by another process`,
      );
    } finally {
      other.close();
    }
    DatabaseLock.acquire(dbPath).release();
  });

  it(
    "names the holder that has the lock now, not a row a previous holder left",
    async () => {
      const dbPath = freshDb();
      // a holder that died (kill -9) leaves its row; the lock itself went with it
      const leftover = new Database(`${dbPath}.lock`);
      leftover.exec(
        "CREATE TABLE holder (pid INTEGER NOT NULL, host TEXT NOT NULL, started_at INTEGER NOT NULL)",
      );
      leftover.prepare("INSERT INTO holder VALUES (?, ?, ?)").run(999_999, "gone.example", 0);
      leftover.close();
      const host = await spawnCliHost({ dbPath, token: "t" });
      hosts.push(host);
      expect(() => DatabaseLock.acquire(dbPath)).toThrow(`is in use by process ${host.child.pid} on `);
    },
    SPAWNS_HOSTS_MS,
  );

  it("the refusal is a DatabaseInUseError by name; a lock file that is no database is refused as what it is", () => {
    const dbPath = freshDb();
    const held = DatabaseLock.acquire(dbPath);
    try {
      DatabaseLock.acquire(dbPath);
      expect.unreachable("the second acquire must throw");
    } catch (err) {
      expect(err).toBeInstanceOf(DatabaseInUseError);
      expect((err as Error).name).toBe("DatabaseInUseError");
    } finally {
      held.release();
    }
    const garbled = freshDb();
    writeFileSync(`${garbled}.lock`, Buffer.alloc(4096, 0x5a));
    const refusal = acquireRefusal(garbled);
    expect(refusal).not.toBeInstanceOf(DatabaseInUseError);
    // told apart from a damaged database: the database itself was not opened
    expect(refusal).toBeInstanceOf(DatabaseLockDamagedError);
    expect((refusal as DatabaseLockDamagedError).lockPath).toBe(`${garbled}.lock`);
    expect(((refusal as Error).cause as { code?: string }).code).toBe("SQLITE_NOTADB");
  });

  it("an opener that cannot write its holder row (another opener is reading the lock file) refuses as in use, and leaves the file free", () => {
    const dbPath = freshDb();
    DatabaseLock.acquire(dbPath).release();
    // A second opener reading who holds the lock (what a refused opener does) keeps a read lock
    // on the file: the holder row cannot be committed past it, the race the comment describes.
    const reader = new Database(`${dbPath}.lock`);
    try {
      reader.exec("BEGIN");
      reader.prepare("SELECT pid FROM holder").all();
      const refusal = acquireRefusal(dbPath);
      expect(refusal).toBeInstanceOf(DatabaseInUseError);
      expect((refusal as Error).message).toContain(`the database ${dbPath} is in use by`);
      reader.exec("COMMIT");
    } finally {
      reader.close();
    }
    // the refused opener let go of the file: the next one takes the lock
    DatabaseLock.acquire(dbPath).release();
  });

  it("a holder row a dead holder left is replaced: a refusal never names it", () => {
    const dbPath = freshDb();
    DatabaseLock.acquire(dbPath).release();
    const file = new Database(`${dbPath}.lock`);
    file.exec("DELETE FROM holder");
    file.prepare("INSERT INTO holder (pid, host, started_at) VALUES (?, ?, ?)").run(999_999_999, "gone", 0);
    file.close();
    const held = DatabaseLock.acquire(dbPath);
    try {
      // the holder is another lock of this process, and the refusal says so
      expect(() => DatabaseLock.acquire(dbPath)).toThrow(/is already open in this process/);
      expect(() => DatabaseLock.acquire(dbPath)).not.toThrow(/gone|999999999/);
    } finally {
      held.release();
    }
  });

  it("a holder row that cannot be written for another reason than a lock (a lock file of another shape) is not called in use", () => {
    const dbPath = freshDb();
    const file = new Database(`${dbPath}.lock`);
    file.exec(
      "CREATE TABLE holder (pid INTEGER NOT NULL, host TEXT NOT NULL, started_at INTEGER NOT NULL, version TEXT NOT NULL)",
    );
    file.close();
    const refusal = acquireRefusal(dbPath);
    expect(refusal).not.toBeInstanceOf(DatabaseInUseError);
    expect((refusal as { code?: string }).code).toBe("SQLITE_CONSTRAINT_NOTNULL");
  });

  it("release closes the lock file, and releasing again does nothing", () => {
    const dbPath = freshDb();
    const openLockFiles = () =>
      readdirSync("/proc/self/fd").filter((fd) => {
        try {
          return readlinkSync(`/proc/self/fd/${fd}`) === `${dbPath}.lock`;
        } catch {
          return false; // the directory's own descriptor, gone by the time it is read
        }
      }).length;
    const lock = DatabaseLock.acquire(dbPath);
    expect(openLockFiles()).toBeGreaterThan(0);
    lock.release();
    expect(openLockFiles()).toBe(0);
    expect(() => lock.release()).not.toThrow();
  });
});
