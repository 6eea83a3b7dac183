import { copyFileSync, readdirSync, rmSync } from "node:fs";
import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { databaseWith as createdWith, sessionIds as sessionIdsOf } from "../support/sqlite-sessions.js";
import { tempDir } from "../support/temp-dir.js";
import { until } from "../support/until.js";
import { runCli, spawnCli } from "./run-cli.js";

const cleanups = cleanupsAfterEach();

const KILLS = 10;

/** A sessionmux database holding `ids`, padded to about `mib` MiB so that a restore takes a moment. */
async function databaseWith(path: string, ids: string[], mib: number): Promise<void> {
  await createdWith(path, ids);
  const db = new Database(path);
  db.exec("CREATE TABLE filler (b BLOB)");
  const insert = db.prepare("INSERT INTO filler VALUES (randomblob(1048576))");
  db.transaction(() => {
    for (let i = 0; i < mib; i++) insert.run();
  })();
  db.close();
}

const sessionIds = (path: string) => sessionIdsOf(path, { readonly: false });

describe("sessionmux restore killed by kill -9", () => {
  it("leaves the database the old one or the new one, whole, wherever it stops", async () => {
    const dir = tempDir();
    cleanups.push(() => dir.remove());
    const pristine = dir.file("pristine.db");
    await databaseWith(pristine, ["old1", "old2"], 2);
    const source = dir.file("source.db");
    await databaseWith(source, ["new1"], 48);
    const backup = dir.file("backup.db");
    expect((await runCli(["backup", backup, "--db", source])).code).toBe(0);
    const db = dir.file("sessions.db");

    const fresh = () => {
      for (const name of readdirSync(dir.path)) {
        if (name.startsWith("sessions.db")) rmSync(dir.file(name), { force: true });
      }
      copyFileSync(pristine, db);
    };
    const copyAppeared = () =>
      until(() => readdirSync(dir.path).some((name) => name.endsWith(".restoring")), 30_000, "the copy");

    // how long a restore runs once its copy appears, to spread the kills over it
    fresh();
    const timed = spawnCli(["restore", backup, "--db", db]);
    await copyAppeared();
    const from = Date.now();
    expect(await timed.exited).toBe(0);
    const span = Date.now() - from;

    const seen = { old: 0, new: 0 };
    for (let run = 0; run < KILLS; run++) {
      fresh();
      const restore = spawnCli(["restore", backup, "--db", db]);
      await copyAppeared();
      const started = Date.now();
      const wait = Math.round((span * (run + 1)) / KILLS);
      await until(() => Date.now() - started >= wait, 30_000, "the moment of the kill");
      await restore.kill();

      const ids = sessionIds(db);
      expect([["old1", "old2"], ["new1"]]).toContainEqual(ids);
      seen[ids.length === 1 ? "new" : "old"]++;
    }
    process.stdout.write(`restore killed over ${span} ms: ${seen.old} times old, ${seen.new} times new\n`);
    expect(seen.old).toBeGreaterThan(0);

    // the next restore clears what the killed ones left and finishes
    const finished = await runCli(["restore", backup, "--db", db, "--no-keep-replaced"]);
    expect(finished.stderr).toBe("");
    expect(finished.code).toBe(0);
    expect(sessionIds(db)).toEqual(["new1"]);
    expect(readdirSync(dir.path).filter((name) => name.endsWith(".restoring"))).toEqual([]);
  }, 300_000);
});
