import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { openHostDatabase } from "../../src/operations/host-database.js";
import { backupDatabase } from "../../src/operations/sqlite-backup.js";
import { restoreDatabase } from "../../src/operations/sqlite-restore.js";
import { openSqliteStoreAlone } from "../../src/operations/sqlite-store-alone.js";
import { SqliteSessionStore } from "../../src/store/sqlite-store.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { tempDir } from "../support/temp-dir.js";
import { refusal, thrownRefusal } from "./startup-refusal.js";

/**
 * The `.lock` file beside a SQLite database holds only which process runs a host on it. Damaged,
 * it was refused as a damaged database (`db_unreadable`, "restore a backup"): an operator who did
 * so replaced a sound database with an older copy. It is told apart, and the database is left alone.
 */

const cleanups = cleanupsAfterEach();

async function soundDatabaseDamagedLock(): Promise<{ dir: ReturnType<typeof tempDir>; db: string }> {
  const dir = tempDir();
  cleanups.push(() => dir.remove());
  const db = dir.file("sessions.db");
  const store = SqliteSessionStore.open(db);
  await store.create({ sessionId: "kept", owner: "admin", model: "demo-fast" });
  await store.close();
  writeFileSync(
    `${db}.lock`,
    "garbage where the lock file was, long enough to be read as a header\n".repeat(4),
  );
  return { dir, db };
}

const expectTold = (message: string, db: string) => {
  expect(message).toContain(`the lock file ${db}.lock is damaged`);
  expect(message).toContain(`database ${db} itself was not opened`);
  expect(message).toContain(`remove ${db}.lock`);
  expect(message).not.toContain("restore");
};

describe("a damaged lock file beside a sound database", () => {
  it("is refused db_lock_damaged at a host's start, and the host starts once it is removed", async () => {
    const { db } = await soundDatabaseDamagedLock();
    const bytes = readFileSync(db);
    const options = { db, hostId: "h1", metrics: { committed: () => undefined } };

    const refused = await refusal(openHostDatabase(options));

    expect(refused.code).toBe("db_lock_damaged");
    expectTold(refused.message, db);
    expect(readFileSync(db).equals(bytes)).toBe(true);
    rmSync(`${db}.lock`);
    const opened = await openHostDatabase(options);
    try {
      expect((await opened.store.header("kept")).status).toBe("ok");
    } finally {
      await opened.close();
    }
  });

  it("is refused db_lock_damaged by migrate and rebuild-projections", async () => {
    const { db } = await soundDatabaseDamagedLock();

    const refused = thrownRefusal(() => openSqliteStoreAlone(db));

    expect(refused.code).toBe("db_lock_damaged");
    expectTold(refused.message, db);
  });

  it("is refused db_lock_damaged by restore, which leaves the database as it was", async () => {
    const { dir, db } = await soundDatabaseDamagedLock();
    const source = dir.file("source.db");
    const other = SqliteSessionStore.open(source);
    await other.create({ sessionId: "restored", owner: "admin", model: "demo-fast" });
    await other.close();
    const backup = dir.file("backup.db");
    await backupDatabase(source, backup);
    const bytes = readFileSync(db);

    const refused = thrownRefusal(() => restoreDatabase(backup, db));

    expect(refused.code).toBe("db_lock_damaged");
    expectTold(refused.message, db);
    expect(readFileSync(db).equals(bytes)).toBe(true);
  });
});
