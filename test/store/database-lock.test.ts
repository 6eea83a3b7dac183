import Database from "better-sqlite3";
import { afterEach, describe, expect, it } from "vitest";
import { DatabaseLock } from "../../src/store/database-lock.js";
import { SqliteSessionStore } from "../../src/store/sqlite-store.js";
import { tempDir } from "../support/temp-dir.js";
import { type CliHost, spawnCliHost } from "../torture/cli-host.js";

const hosts: CliHost[] = [];
const dirs: { remove(): void }[] = [];
afterEach(async () => {
  for (const host of hosts.splice(0)) await host.kill9();
  for (const dir of dirs.splice(0)) dir.remove();
});

function freshDb(): string {
  const dir = tempDir();
  dirs.push(dir);
  return dir.file("sessions.db");
}

describe("one host per SQLite file", () => {
  it("a second host on the same file refuses to start, naming the file and the first host's pid", async () => {
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
  });

  it("within one process a second open is refused, and closing the store releases the lock", async () => {
    const dbPath = freshDb();
    const store = SqliteSessionStore.open(dbPath);
    expect(() => SqliteSessionStore.open(dbPath)).toThrow(/is in use by another process/);
    await store.close();
    const again = SqliteSessionStore.open(dbPath);
    await again.close();
    DatabaseLock.acquire(dbPath).release();
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
});
