import { readdirSync } from "node:fs";
import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { SqliteSessionStore } from "../../src/store/sqlite-store.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { tempDir } from "../support/temp-dir.js";
import { until } from "../support/until.js";
import { runCli, spawnCli } from "./run-cli.js";

const cleanups = cleanupsAfterEach();

/** A sessionmux database of about `mib` MiB, so that copying it takes a moment. */
async function largeDatabase(path: string, mib: number): Promise<void> {
  await SqliteSessionStore.open(path).close();
  const db = new Database(path);
  db.exec("CREATE TABLE filler (b BLOB)");
  const insert = db.prepare("INSERT INTO filler VALUES (randomblob(1048576))");
  db.transaction(() => {
    for (let i = 0; i < mib; i++) insert.run();
  })();
  db.close();
}

describe("sessionmux backup after a backup was killed", () => {
  it("removes the .partial copy a backup killed by kill -9 left in the folder", async () => {
    const dir = tempDir();
    cleanups.push(() => dir.remove());
    const db = dir.file("sessions.db");
    await largeDatabase(db, 64);
    const backups = tempDir();
    cleanups.push(() => backups.remove());

    const killed = spawnCli(["backup", backups.file("monday.db"), "--db", db]);
    const partialsOf = (names: string[]) => names.filter((name) => name.includes(".partial"));
    await until(() => partialsOf(readdirSync(backups.path)).length > 0, 30_000, "the backup's copy");
    await killed.kill();
    expect(partialsOf(readdirSync(backups.path))).toContain(`monday.db.${killed.pid}.partial`);

    const next = await runCli(["backup", backups.file("tuesday.db"), "--db", db]);

    expect(next.stderr).toBe("");
    expect(next.code).toBe(0);
    expect(readdirSync(backups.path)).toEqual(["tuesday.db"]);
  }, 120_000);
});
