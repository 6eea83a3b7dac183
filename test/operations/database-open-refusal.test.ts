import { execFile } from "node:child_process";
import { chmodSync, chownSync, mkdirSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { SqliteSessionStore } from "../../src/store/sqlite-store.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { tempDir } from "../support/temp-dir.js";
import { mountTmpfs, remount } from "../support/tmpfs.js";

/**
 * A host's start on a SQLite database it cannot write (a full disk, a read-only file or folder)
 * is told apart from one it cannot read (damaged, not a database): each has its own code, and
 * the message says what to check. The host opens the database in a child process: for the size
 * limit (`ulimit -S -f`, this process alone's full disk), and so that, when the tests run as
 * root (whom file modes do not stop), it can run as `nobody`, to whom a read-only mode applies.
 */

const cleanups = cleanupsAfterEach();
const fixture = fileURLToPath(new URL("./fixtures/open-host-database.ts", import.meta.url));
const asRoot = process.getuid?.() === 0;
const NOBODY = 65534;

interface Outcome {
  opened?: boolean;
  code?: string;
  message?: string;
  cause?: string;
}

/** A folder of the test's own that the child may write (it owns it) unless a test says otherwise. */
function folder(): ReturnType<typeof tempDir> {
  const dir = tempDir();
  cleanups.push(() => dir.remove());
  if (asRoot) chownSync(dir.path, NOBODY, NOBODY);
  return dir;
}

/** A migrated database at `file`, closed again (no WAL beside it), owned by the child's user. */
async function existingDatabase(file: string): Promise<void> {
  await SqliteSessionStore.open(file).close();
  if (!asRoot) return;
  for (const path of [file, `${file}.lock`]) chownSync(path, NOBODY, NOBODY);
}

function open(db: string, maxFileKiB?: number): Promise<Outcome> {
  const limit = maxFileKiB === undefined ? "" : `ulimit -S -f ${maxFileKiB} && `;
  return new Promise((resolve, reject) => {
    execFile(
      "bash",
      ["-c", `${limit}exec "$0" "$@"`, process.execPath, "--import", "tsx", fixture, db],
      {
        timeout: 60_000,
        ...(asRoot ? { uid: NOBODY, gid: NOBODY, env: { ...process.env, HOME: "/tmp" } } : {}),
      },
      (error, stdout, stderr) => {
        const line = stdout.trim().split("\n").pop();
        if (!line) reject(new Error(`the host's open printed nothing (${error?.message}): ${stderr}`));
        else resolve(JSON.parse(line) as Outcome);
      },
    );
  });
}

const WRITABLE_HINT =
  /check that the file, the -wal, -shm and \.lock files beside it and its folder are writable by this user, and that its file system is not mounted read-only$/;

describe("a host's start on a database it cannot write or read", () => {
  it("on a disk with no room, is refused db_unwritable, saying to check the disk's room", async () => {
    const dir = folder();
    const fresh = dir.file("new.db");
    const refused = await open(fresh, 8);
    expect(refused).toMatchObject({
      code: "db_unwritable",
      cause: expect.stringMatching(/^SQLITE_(FULL|IOERR)/),
    });
    expect(refused.message).toMatch(
      new RegExp(`^cannot write database ${fresh}: .+; check that its disk has room`),
    );

    // an existing database needs room at start too: its WAL and lock
    const existing = dir.file("sessions.db");
    await existingDatabase(existing);
    const full = await open(existing, 8);
    expect(full).toMatchObject({ code: "db_unwritable" });
    expect(full.message).toContain(`cannot write database ${existing}: `);
    expect(full.message).toContain("check that its disk has room");
    expect(await open(existing)).toEqual({ opened: true });
  }, 120_000);

  it("on a read-only file, is refused db_unwritable, saying to check the file's and folder's modes", async () => {
    const dir = folder();
    const file = dir.file("sessions.db");
    await existingDatabase(file);
    chmodSync(file, 0o444);
    const refused = await open(file);
    expect(refused).toMatchObject({
      code: "db_unwritable",
      cause: expect.stringMatching(/^SQLITE_READONLY/),
    });
    expect(refused.message).toMatch(new RegExp(`^cannot write database ${file}: `));
    expect(refused.message).toMatch(WRITABLE_HINT);
    // SQLite made the WAL and its index as read-only as the file: the operator's fix covers them
    for (const path of [file, `${file}-wal`, `${file}-shm`]) chmodSync(path, 0o644);
    expect(await open(file)).toEqual({ opened: true });
  }, 120_000);

  it("in a read-only folder, new or existing, is refused db_unwritable", async () => {
    const dir = folder();
    const existing = dir.file("sessions.db");
    await existingDatabase(existing);
    const fresh = dir.file("new.db");
    chmodSync(dir.path, 0o555);
    cleanups.push(() => chmodSync(dir.path, 0o755));
    for (const file of [existing, fresh]) {
      const refused = await open(file);
      expect(refused).toMatchObject({ code: "db_unwritable" });
      expect(refused.message).toMatch(new RegExp(`^cannot write database ${file}: `));
      expect(refused.message).toMatch(WRITABLE_HINT);
    }
    chmodSync(dir.path, 0o755);
    expect(await open(existing)).toEqual({ opened: true });
  }, 120_000);

  it("on a file that is no database, or one this user may not read, is refused db_unreadable", async () => {
    const dir = folder();
    const notes = dir.file("notes.db");
    writeFileSync(notes, "these are notes, not a database\n".repeat(100));
    if (asRoot) chownSync(notes, NOBODY, NOBODY);
    const damaged = await open(notes);
    expect(damaged).toEqual({
      code: "db_unreadable",
      message: `cannot read database ${notes}: file is not a database; the file is damaged or not a sessionmux database (sessionmux restore puts a backup in its place)`,
      cause: "SQLITE_NOTADB",
    });

    mkdirSync(dir.file("sub"));
    const hidden = dir.file("sub/sessions.db");
    await existingDatabase(hidden);
    if (asRoot) chownSync(dir.file("sub"), NOBODY, NOBODY);
    chmodSync(hidden, 0o200);
    const unreadable = await open(hidden);
    expect(unreadable).toMatchObject({ code: "db_unreadable" });
    expect(unreadable.message).toMatch(/; check that the file is readable by this user$/);
  }, 120_000);
  // only root may mount a file system, and read-only is what root's writes cannot get past
  it.runIf(asRoot)(
    "on a file system mounted read-only, new or existing, is refused db_unwritable",
    async (ctx) => {
      const dir = folder();
      if (!mountTmpfs(dir.path, "size=4m", cleanups)) ctx.skip("no tmpfs may be mounted here");
      chownSync(dir.path, NOBODY, NOBODY);
      const existing = dir.file("sessions.db");
      await existingDatabase(existing);
      remount(dir.path, "ro");
      for (const file of [existing, dir.file("new.db")]) {
        const refused = await open(file);
        expect(refused).toMatchObject({ code: "db_unwritable" });
        expect(refused.message).toMatch(new RegExp(`^cannot write database ${file}: `));
        expect(refused.message).toMatch(WRITABLE_HINT);
      }
      remount(dir.path, "rw");
      expect(await open(existing)).toEqual({ opened: true });
    },
    120_000,
  );
});
