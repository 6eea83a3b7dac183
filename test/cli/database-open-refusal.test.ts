import { chmodSync, chownSync, readFileSync, writeFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { SqliteSessionStore } from "../../src/store/sqlite-store.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { tempDir } from "../support/temp-dir.js";
import { mountTmpfs, remount } from "../support/tmpfs.js";
import { runCli } from "./run-cli.js";

/**
 * `migrate` and `rebuild-projections` on a SQLite file they cannot write or read are refused as a
 * host's start refuses it (`db_unwritable`, `db_unreadable`, saying what to check), printed as
 * every refusal is. The commands run as real processes; when the tests run as root (whom file
 * modes do not stop) they run as `nobody`, to whom a read-only mode applies.
 */

const cleanups = cleanupsAfterEach();
const asRoot = process.getuid?.() === 0;
const NOBODY = 65534;
const user = asRoot ? { uid: NOBODY, gid: NOBODY } : undefined;
const COMMANDS = [["migrate"], ["rebuild-projections"]];

/** A folder of the test's own that the commands' user owns. */
function folder(): ReturnType<typeof tempDir> {
  const dir = tempDir();
  cleanups.push(() => dir.remove());
  if (asRoot) chownSync(dir.path, NOBODY, NOBODY);
  return dir;
}

/** A database written by this build and closed (no WAL beside it), owned by the commands' user. */
async function database(file: string): Promise<void> {
  const store = SqliteSessionStore.open(file);
  await store.create({ sessionId: "kept", owner: "admin", model: "demo-fast" });
  await store.close();
  if (asRoot) for (const path of [file, `${file}.lock`]) chownSync(path, NOBODY, NOBODY);
}

const run = (command: string[], db: string) => runCli([...command, "--db", db], { HOME: "/tmp" }, user);

const WRITABLE_HINT =
  "check that the file, the -wal, -shm and .lock files beside it and its folder are writable by this user, and that its file system is not mounted read-only";

function unwritable(stderr: string, db: string): void {
  expect(stderr.startsWith(`error: db_unwritable: cannot write database ${db}: `)).toBe(true);
  expect(stderr.endsWith(`; ${WRITABLE_HINT}\n`)).toBe(true);
}

describe("migrate and rebuild-projections on a SQLite file they cannot open", () => {
  it("refuse a file that is no database db_unreadable, saying to restore a backup, and leave it as it was", async () => {
    const db = folder().file("sessions.db");
    writeFileSync(db, "these are notes, not a database\n".repeat(100));
    if (asRoot) chownSync(db, NOBODY, NOBODY);
    const before = readFileSync(db);
    for (const command of COMMANDS) {
      const refused = await run(command, db);
      expect(refused).toEqual({
        code: 2,
        stdout: "",
        stderr: `error: db_unreadable: cannot read database ${db}: file is not a database; the file is damaged or not a sessionmux database (sessionmux restore puts a backup in its place)\n`,
      });
    }
    expect(readFileSync(db).equals(before)).toBe(true);
  }, 120_000);

  it("refuse a read-only database file db_unwritable, saying to check the modes, and work once it is writable", async () => {
    const db = folder().file("sessions.db");
    await database(db);
    chmodSync(db, 0o444);
    for (const command of COMMANDS) {
      const refused = await run(command, db);
      expect(refused).toMatchObject({ code: 2, stdout: "" });
      unwritable(refused.stderr, db);
    }
    chmodSync(db, 0o644);
    expect(await run(["migrate"], db)).toMatchObject({ code: 0, stderr: "" });
    expect(await run(["rebuild-projections"], db)).toEqual({
      code: 0,
      stdout: "projections rebuilt\n",
      stderr: "",
    });
  }, 120_000);

  it("refuse a database in a read-only folder db_unwritable, and work once the folder is writable", async () => {
    const dir = folder();
    const db = dir.file("sessions.db");
    await database(db);
    chmodSync(dir.path, 0o555);
    cleanups.push(() => chmodSync(dir.path, 0o755));
    for (const command of COMMANDS) {
      const refused = await run(command, db);
      expect(refused).toMatchObject({ code: 2, stdout: "" });
      unwritable(refused.stderr, db);
    }
    chmodSync(dir.path, 0o755);
    expect(await run(["migrate"], db)).toMatchObject({ code: 0, stderr: "" });
  }, 120_000);

  // only root may mount a file system, and read-only is what root's writes cannot get past
  it.runIf(asRoot)(
    "refuse a database on a file system mounted read-only db_unwritable, and work once it is writable",
    async (ctx) => {
      const dir = folder();
      if (!mountTmpfs(dir.path, "size=4m", cleanups)) ctx.skip("no tmpfs may be mounted here");
      chownSync(dir.path, NOBODY, NOBODY);
      const db = dir.file("sessions.db");
      await database(db);
      remount(dir.path, "ro");
      for (const command of COMMANDS) {
        const refused = await run(command, db);
        expect(refused).toMatchObject({ code: 2, stdout: "" });
        unwritable(refused.stderr, db);
      }
      remount(dir.path, "rw");
      expect(await run(["migrate"], db)).toMatchObject({ code: 0, stderr: "" });
    },
    120_000,
  );
});
