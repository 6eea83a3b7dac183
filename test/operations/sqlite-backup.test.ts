import { copyFileSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from "node:fs";
import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { backupDatabase } from "../../src/operations/sqlite-backup.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { tempDir } from "../support/temp-dir.js";
import { refusal } from "./startup-refusal.js";

const cleanups = cleanupsAfterEach();

/** Rows of 4 KiB each: 300 of them make a database of more than 300 pages. */
const ROWS = 300;
/**
 * Writes the steady writer makes at most; a backup that restarts on every write outlasts it. Far
 * above what a one-step backup sees, as the writer also runs while the backup waits on the thread
 * pool before its first step.
 */
const MAX_WRITES = 5000;

function folder(): ReturnType<typeof tempDir> {
  const dir = tempDir();
  cleanups.push(() => dir.remove());
  return dir;
}

/** A WAL-mode database of `ROWS` rows, closed. */
function database(path: string): void {
  const db = new Database(path);
  try {
    db.pragma("journal_mode = WAL");
    db.exec("CREATE TABLE item (id INTEGER PRIMARY KEY, body BLOB NOT NULL)");
    const insert = db.prepare("INSERT INTO item (body) VALUES (?)");
    db.transaction(() => {
      for (let i = 0; i < ROWS; i++) insert.run(Buffer.alloc(4096, i % 251));
    })();
  } finally {
    db.close();
  }
}

function rowCount(path: string): number {
  const db = new Database(path, { readonly: true });
  try {
    return db.prepare("SELECT count(*) FROM item").pluck().get() as number;
  } finally {
    db.close();
  }
}

function filesOf(dir: ReturnType<typeof tempDir>, prefix: string): string[] {
  return readdirSync(dir.path)
    .filter((name) => name.startsWith(prefix))
    .sort();
}

/** Files of `dir` this process holds open (deleted ones included). */
function openFilesIn(dir: ReturnType<typeof tempDir>): string[] {
  const open: string[] = [];
  for (const fd of readdirSync("/proc/self/fd")) {
    try {
      const target = readlinkSync(`/proc/self/fd/${fd}`);
      if (target.startsWith(`${dir.path}/`)) open.push(target);
    } catch {
      // the fd of the listing itself is gone by now
    }
  }
  return open;
}

describe("backupDatabase", () => {
  it("puts a whole, checked copy at the target and reports it", async () => {
    const dir = folder();
    const source = dir.file("sessions.db");
    database(source);
    const target = dir.file("copy.db");

    const report = await backupDatabase(source, target);

    expect(report).toEqual({ source, target, pages: expect.any(Number), integrity: "ok" });
    expect(report.pages).toBeGreaterThan(ROWS);
    // the copy and nothing else: no partial, no WAL or index of the check beside it
    expect(filesOf(dir, "copy.db")).toEqual(["copy.db"]);
    expect(rowCount(target)).toBe(ROWS);
  });

  it("leaves no file of the source or the copy open", async () => {
    const dir = folder();
    const source = dir.file("sessions.db");
    database(source);

    await backupDatabase(source, dir.file("copy.db"));

    expect(openFilesIn(dir)).toEqual([]);
  });

  it("finishes while another connection keeps writing to the database", async () => {
    const dir = folder();
    const source = dir.file("sessions.db");
    database(source);
    const writer = new Database(source);
    cleanups.push(() => {
      writer.close();
    });
    writer.pragma("synchronous = OFF");
    const insert = writer.prepare("INSERT INTO item (body) VALUES (?)");
    // one write between any two steps of the backup: a backup taken in several steps restarts
    // at each and would finish only once the writer stops
    let writes = 0;
    let done = false;
    const writing = new Promise<void>((resolve) => {
      const write = (): void => {
        if (done || writes >= MAX_WRITES) {
          resolve();
          return;
        }
        insert.run(Buffer.from("x"));
        writes++;
        setImmediate(write);
      };
      setImmediate(write);
    });

    const target = dir.file("copy.db");
    const report = await backupDatabase(source, target).finally(() => {
      done = true;
    });
    await writing;

    expect(report.integrity).toBe("ok");
    expect(writes).toBeLessThan(MAX_WRITES);
    // the copy is the database as of one read transaction: every row before it, some after
    const copied = rowCount(target);
    expect(copied).toBeGreaterThanOrEqual(ROWS);
    expect(copied).toBeLessThanOrEqual(ROWS + writes);
  });

  it("copies a database whose host was killed without writing to it", async () => {
    const dir = folder();
    const live = dir.file("live.db");
    database(live);
    // the image a killed host leaves: committed rows still in the WAL, never checkpointed
    const host = new Database(live);
    host.pragma("wal_autocheckpoint = 0");
    host.prepare("INSERT INTO item (body) VALUES (?)").run(Buffer.from("after the crash"));
    const source = dir.file("sessions.db");
    copyFileSync(live, source);
    copyFileSync(`${live}-wal`, `${source}-wal`);
    host.close();
    const before = readFileSync(source);

    const target = dir.file("copy.db");
    await backupDatabase(source, target);

    expect(rowCount(target)).toBe(ROWS + 1);
    // read-only: the rows stay in the WAL, the database file is as the host left it
    expect(readFileSync(source).equals(before)).toBe(true);
  });

  it("refuses a target that exists before copying anything, and leaves it as it was", async () => {
    const dir = folder();
    const source = dir.file("sessions.db");
    database(source);
    const target = dir.file("copy.db");
    writeFileSync(target, "an older backup");
    let copied = false;

    const refused = await refusal(
      backupDatabase(source, target, {
        beforeCheck: () => {
          copied = true;
        },
      }),
    );

    expect(refused.code).toBe("backup_target_exists");
    expect(refused.message).toContain(`${target} already exists`);
    expect(copied).toBe(false);
    expect(readFileSync(target, "utf8")).toBe("an older backup");
  });

  it("refuses a good copy when a file appeared at the target meanwhile, and keeps that file", async () => {
    const dir = folder();
    const source = dir.file("sessions.db");
    database(source);
    const target = dir.file("copy.db");

    const refused = await refusal(
      backupDatabase(source, target, {
        beforeCheck: () => writeFileSync(target, "an older backup"),
      }),
    );

    expect(refused.code).toBe("backup_target_exists");
    expect(refused.message).toContain(`${target} already exists`);
    expect(readFileSync(target, "utf8")).toBe("an older backup");
    expect(filesOf(dir, "copy.db")).toEqual(["copy.db"]);
  });

  it("fails a copy that vanished before its check instead of checking an empty database", async () => {
    const dir = folder();
    const source = dir.file("sessions.db");
    database(source);
    const target = dir.file("copy.db");

    const refused = await refusal(
      backupDatabase(source, target, { beforeCheck: (copyPath) => rmSync(copyPath) }),
    );

    expect(refused.code).toBe("backup_failed");
    expect(filesOf(dir, "copy.db")).toEqual([]);
  });

  it("fails a copy into a folder that does not exist, saying why, and writes nothing", async () => {
    const dir = folder();
    const source = dir.file("sessions.db");
    database(source);
    const target = dir.file("missing/copy.db");

    const refused = await refusal(backupDatabase(source, target));

    expect(refused.code).toBe("backup_failed");
    expect(refused.message).toMatch(
      new RegExp(
        `^backup to ${target} failed \\(.*directory does not exist.*\\); nothing was written to ${target}$`,
      ),
    );
    expect(refused.cause).toBeInstanceOf(Error);
    expect(readdirSync(dir.path).filter((name) => !name.startsWith("sessions.db"))).toEqual([]);
  });
});
