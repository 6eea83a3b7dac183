import { closeSync, openSync, readdirSync, readFileSync, writeFileSync, writeSync } from "node:fs";
import { afterEach, describe, expect, it } from "vitest";
import { backupDatabase } from "../../src/operations/sqlite-backup.js";
import { SqliteSessionStore } from "../../src/store/sqlite-store.js";
import { tempDir } from "../support/temp-dir.js";
import { refusal } from "./startup-refusal.js";

/**
 * A copy that fails `PRAGMA integrity_check` is no backup: it is removed, never linked into
 * place, and the backup is refused `backup_corrupt`.
 */

const dirs: { remove(): void }[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) dir.remove();
});

async function database(): Promise<{ dir: ReturnType<typeof tempDir>; db: string }> {
  const dir = tempDir();
  dirs.push(dir);
  const db = dir.file("sessions.db");
  const store = SqliteSessionStore.open(db);
  await store.create({ sessionId: "s1", owner: "admin", model: "demo-fast" });
  await store.close();
  return { dir, db };
}

/** Fills the copy's second page with 0xff: its integrity check then reports the damage. */
function damage(copyPath: string): void {
  garble(copyPath, 4096, 4096);
}

function garble(copyPath: string, at: number, length: number): void {
  const fd = openSync(copyPath, "r+");
  try {
    writeSync(fd, Buffer.alloc(length, 0xff), 0, length, at);
  } finally {
    closeSync(fd);
  }
}

describe("a backup whose copy fails its integrity check", () => {
  it("is refused backup_corrupt and leaves nothing at the target or beside it", async () => {
    const { dir, db } = await database();
    const target = dir.file("copy.db");
    let damaged = "";
    const refused = await refusal(
      backupDatabase(db, target, {
        beforeCheck: (copyPath) => {
          damaged = copyPath;
          damage(copyPath);
        },
      }),
    );
    expect(refused.code).toBe("backup_corrupt");
    expect(refused.message).toContain(`nothing was written to ${target}`);
    expect(damaged).not.toBe("");
    expect(readdirSync(dir.path).filter((name) => name.startsWith("copy.db"))).toEqual([]);
  });

  it("is refused backup_corrupt when the copy is too damaged for SQLite to read at all", async () => {
    const { dir, db } = await database();
    const target = dir.file("copy.db");
    const refused = await refusal(
      backupDatabase(db, target, {
        // the header names the file a database: without it SQLite refuses the file (SQLITE_NOTADB)
        beforeCheck: (copyPath) => garble(copyPath, 0, 100),
      }),
    );
    expect(refused.code).toBe("backup_corrupt");
    expect(refused.message).toContain("failed its integrity check");
    expect(readdirSync(dir.path).filter((name) => name.startsWith("copy.db"))).toEqual([]);
  });

  it("leaves a file that appeared at the target meanwhile as it was", async () => {
    const { dir, db } = await database();
    const target = dir.file("copy.db");
    const refused = await refusal(
      backupDatabase(db, target, {
        beforeCheck: (copyPath) => {
          writeFileSync(target, "an older backup");
          damage(copyPath);
        },
      }),
    );
    expect(refused.code).toBe("backup_corrupt");
    expect(readFileSync(target, "utf8")).toBe("an older backup");
    expect(readdirSync(dir.path).filter((name) => name.startsWith("copy.db"))).toEqual(["copy.db"]);
  });
});
