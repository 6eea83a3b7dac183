import { readdirSync, readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { backupDatabase } from "../../src/operations/sqlite-backup.js";
import { restoreDatabase } from "../../src/operations/sqlite-restore.js";
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
import { thrownRefusal } from "./startup-refusal.js";

/**
 * The database a restore replaces must have its write-ahead log folded into its file first: a WAL
 * left beside the restored file would be replayed into it, and one removed would lose what only it
 * holds. A damaged file cannot be folded into, and the refusal must leave it and its WAL as they
 * were, for whoever salvages them.
 */

const cleanups = cleanupsAfterEach();

describe("a restore over a database whose write-ahead log cannot be folded", () => {
  it("refuses a damaged file, and leaves it damaged as it was, with its WAL byte for byte", async () => {
    const dir = tempDir();
    cleanups.push(() => dir.remove());
    const db = await databaseWithWalOnlyWrite(dir, "sessions.db");
    const source = dir.file("source.db");
    const store = SqliteSessionStore.open(source);
    await store.create({ sessionId: "new1", owner: "admin", model: "demo-fast" });
    await store.close();
    const backup = dir.file("backup.db");
    await backupDatabase(source, backup);
    damageHeader(db);
    const wal = readFileSync(`${db}-wal`);
    expect(wal.length).toBeGreaterThan(32);
    const listing = readdirSync(dir.path).sort();

    const refused = thrownRefusal(() => restoreDatabase(backup, db));

    expect(refused.code).toBe("restore_failed");
    expect(refused.message).toContain(`cannot fold the write-ahead log of ${db}`);
    expect(refused.message).toContain("Nothing was changed");
    expect(readFileSync(`${db}-wal`).equals(wal)).toBe(true);
    // the connection that found the file damaged copied the WAL's pages into it as it closed:
    // the same pages as the WAL holds, which stays; the damage stays too
    expect(readFileSync(db).subarray(0, 16).toString("latin1")).toBe("not a database!!");
    // nothing beside them but the lock file a restore takes (a host takes the same one)
    expect(readdirSync(dir.path).sort()).toEqual([...listing, "sessions.db.lock"].sort());

    // mended by hand, the same files hold the write only the WAL had
    mendHeader(db);
    expect(walNotes(db)).toEqual([WAL_ONLY_NOTE]);
  });
});
