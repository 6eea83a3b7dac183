import { readdirSync, readFileSync } from "node:fs";
import { dirname } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { backupDatabase } from "../../src/operations/sqlite-backup.js";
import { restoreDatabase } from "../../src/operations/sqlite-restore.js";
import { SqliteSessionStore } from "../../src/store/sqlite-store.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { tempDir } from "../support/temp-dir.js";
import { errno } from "./injected-failures.js";
import { thrownRefusal } from "./startup-refusal.js";

/**
 * Failures of the two steps that put the checked copy in place, which a test cannot provoke on a
 * local disk as root: the rename (across file systems, say) and the folder sync after it (an I/O
 * error). Everything else is real.
 */

const failures = vi.hoisted(() => ({
  rename: undefined as NodeJS.ErrnoException | undefined,
  syncFolder: undefined as NodeJS.ErrnoException | undefined,
}));

vi.mock("node:fs", async (importOriginal) => {
  const { failingWhileSet } = await import("./injected-failures.js");
  return failingWhileSet(
    await importOriginal<typeof import("node:fs")>(),
    "renameSync",
    () => failures.rename,
  );
});

vi.mock("../../src/operations/durable-files.js", async (importOriginal) => {
  const { failingWhileSet } = await import("./injected-failures.js");
  const durable = await importOriginal<typeof import("../../src/operations/durable-files.js")>();
  return failingWhileSet(durable, "syncFolder", () => failures.syncFolder);
});

const cleanups = cleanupsAfterEach();
afterEach(() => {
  failures.rename = undefined;
  failures.syncFolder = undefined;
});

async function databases(): Promise<{ dir: ReturnType<typeof tempDir>; db: string; backup: string }> {
  const dir = tempDir();
  cleanups.push(() => dir.remove());
  const db = dir.file("sessions.db");
  const source = dir.file("source.db");
  for (const [path, id] of [
    [db, "old1"],
    [source, "new1"],
  ] as const) {
    const store = SqliteSessionStore.open(path);
    await store.create({ sessionId: id, owner: "admin", model: "demo-fast" });
    await store.close();
  }
  const backup = dir.file("backup.db");
  await backupDatabase(source, backup);
  return { dir, db, backup };
}

describe("a restore whose copy cannot be put in place", () => {
  it("is restore_failed and leaves the database, and nothing else, as it was when the rename fails", async () => {
    const { dir, db, backup } = await databases();
    const before = readdirSync(dir.path).sort();
    const bytes = readFileSync(db);
    failures.rename = errno("EXDEV");

    const refused = thrownRefusal(() => restoreDatabase(backup, db));

    expect(refused.code).toBe("restore_failed");
    expect(refused.message).toContain("EXDEV: simulated");
    expect(refused.message).toContain(`${db} is as it was before`);
    expect(refused.cause).toBe(failures.rename);
    expect(readdirSync(dir.path).sort()).toEqual(before);
    expect(readFileSync(db).equals(bytes)).toBe(true);
  });

  it("says the backup is in place but not yet safe from a power cut when the folder cannot be synced", async () => {
    const { db, backup } = await databases();
    failures.syncFolder = errno("EIO");

    const refused = thrownRefusal(() => restoreDatabase(backup, db));

    expect(refused.code).toBe("restore_failed");
    expect(refused.message).toContain("EIO: simulated");
    expect(refused.message).toContain(`the backup is at ${db}`);
    expect(readdirSync(dirname(db)).some((name) => name.endsWith(".restoring"))).toBe(false);
  });
});
