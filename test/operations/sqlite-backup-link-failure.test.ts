import { readdirSync } from "node:fs";
import Database from "better-sqlite3";
import { afterEach, describe, expect, it, vi } from "vitest";
import { backupDatabase } from "../../src/operations/sqlite-backup.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { tempDir } from "../support/temp-dir.js";
import { errno } from "./injected-failures.js";
import { refusal } from "./startup-refusal.js";

/**
 * Failures of the two steps that put a checked copy in place, which a test cannot provoke on a
 * local disk as root: the link (a filesystem without hard links refuses it) and the folder sync
 * after it (an I/O error). Everything else is real.
 */

const failures = vi.hoisted(() => ({
  link: undefined as NodeJS.ErrnoException | undefined,
  syncFolder: undefined as NodeJS.ErrnoException | undefined,
}));

vi.mock("node:fs", async (importOriginal) => {
  const { failingWhileSet } = await import("./injected-failures.js");
  return failingWhileSet(await importOriginal<typeof import("node:fs")>(), "linkSync", () => failures.link);
});

vi.mock("../../src/operations/durable-files.js", async (importOriginal) => {
  const { failingWhileSet } = await import("./injected-failures.js");
  const durable = await importOriginal<typeof import("../../src/operations/durable-files.js")>();
  return failingWhileSet(durable, "syncFolder", () => failures.syncFolder);
});

const cleanups = cleanupsAfterEach();
afterEach(() => {
  failures.link = undefined;
  failures.syncFolder = undefined;
});

function database(): { dir: ReturnType<typeof tempDir>; source: string } {
  const dir = tempDir();
  cleanups.push(() => dir.remove());
  const source = dir.file("sessions.db");
  const db = new Database(source);
  db.pragma("journal_mode = WAL");
  db.exec("CREATE TABLE item (id INTEGER PRIMARY KEY)");
  db.close();
  return { dir, source };
}

describe("a backup whose copy cannot be put in place", () => {
  it("is backup_failed, not backup_target_exists, when the link fails for another reason", async () => {
    const { dir, source } = database();
    const target = dir.file("copy.db");
    failures.link = errno("EPERM");

    const refused = await refusal(backupDatabase(source, target));

    expect(refused.code).toBe("backup_failed");
    expect(refused.message).toContain("EPERM: simulated");
    expect(refused.cause).toBe(failures.link);
    expect(readdirSync(dir.path).filter((name) => name.startsWith("copy.db"))).toEqual([]);
  });

  it("takes the linked copy away again when its folder cannot be synced", async () => {
    const { dir, source } = database();
    const target = dir.file("copy.db");
    failures.syncFolder = errno("EIO");

    const refused = await refusal(backupDatabase(source, target));

    // not known to survive a power cut: not reported, and not left looking like a backup
    expect(refused.code).toBe("backup_failed");
    expect(refused.message).toContain("EIO: simulated");
    expect(readdirSync(dir.path).filter((name) => name.startsWith("copy.db"))).toEqual([]);
  });
});
