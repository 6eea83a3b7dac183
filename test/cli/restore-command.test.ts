import { spawn } from "node:child_process";
import {
  closeSync,
  copyFileSync,
  openSync,
  readdirSync,
  readFileSync,
  writeFileSync,
  writeSync,
} from "node:fs";
import { fileURLToPath } from "node:url";
import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { SCHEMA_VERSION } from "../../src/store/migrations.js";
import { SqliteSessionStore } from "../../src/store/sqlite-store.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { databaseWith, sessionIds as sessionIdsOf } from "../support/sqlite-sessions.js";
import { tempDir } from "../support/temp-dir.js";
import { readWholeLog } from "../support/whole-log.js";
import { runCli, startServe } from "./run-cli.js";

const cleanups = cleanupsAfterEach();

function folder(): ReturnType<typeof tempDir> {
  const dir = tempDir();
  cleanups.push(() => dir.remove());
  return dir;
}

/** A backup (as `sessionmux backup` writes it) of a database holding `ids`. */
async function backupWith(dir: ReturnType<typeof tempDir>, name: string, ids: string[]): Promise<string> {
  const source = dir.file(`${name}-source.db`);
  await databaseWith(source, ids);
  const backup = dir.file(`${name}.db`);
  const made = await runCli(["backup", backup, "--db", source]);
  if (made.code !== 0) throw new Error(made.stderr);
  return backup;
}

const sessionIds = (path: string) => sessionIdsOf(path, { readonly: true });

describe("sessionmux restore", () => {
  it("puts the backup in place of the database and keeps the replaced one beside it", async () => {
    const dir = folder();
    const db = dir.file("sessions.db");
    await databaseWith(db, ["old1", "old2"]);
    const backup = await backupWith(dir, "monday", ["new1"]);

    const restored = await runCli(["restore", backup], { SESSIONMUX_DB: db });

    expect(restored.stderr).toBe("");
    expect(restored.code).toBe(0);
    const report = JSON.parse(restored.stdout) as { replaced: string; schemaVersion: number; db: string };
    expect(report).toMatchObject({ backup, db, schemaVersion: SCHEMA_VERSION });
    expect(report.replaced).toMatch(/sessions\.db\.replaced-\d{8}T\d{9}Z$/);
    expect(sessionIds(db)).toEqual(["new1"]);
    expect(sessionIds(report.replaced)).toEqual(["old1", "old2"]);
    // a host starts on the restored file
    const store = SqliteSessionStore.open(db);
    await store.close();
  });

  it("with --no-keep-replaced keeps nothing aside, and restores to a database that is not there yet", async () => {
    const dir = folder();
    const db = dir.file("sessions.db");
    await databaseWith(db, ["old1"]);
    const backup = await backupWith(dir, "monday", ["new1"]);

    const restored = await runCli(["restore", backup, "--db", db, "--no-keep-replaced"]);
    expect(restored.code).toBe(0);
    expect(JSON.parse(restored.stdout)).toMatchObject({ replaced: null });
    expect(readdirSync(dir.path).filter((name) => name.startsWith("sessions.db"))).toEqual([
      "sessions.db",
      "sessions.db.lock",
    ]);
    expect(sessionIds(db)).toEqual(["new1"]);

    const fresh = dir.file("fresh.db");
    const created = await runCli(["restore", backup, "--db", fresh]);
    expect(created.code).toBe(0);
    expect(JSON.parse(created.stdout)).toMatchObject({ replaced: null });
    expect(sessionIds(fresh)).toEqual(["new1"]);
  });

  it("keeps what the replaced database's WAL held when its host was killed by kill -9", async () => {
    const dir = folder();
    const db = dir.file("sessions.db");
    const acked = await killedAppender(db);
    const backup = await backupWith(dir, "monday", ["new1"]);

    const restored = await runCli(["restore", backup, "--db", db]);

    expect(restored.stderr).toBe("");
    expect(restored.code).toBe(0);
    expect(sessionIds(db)).toEqual(["new1"]);
    const aside = SqliteSessionStore.open((JSON.parse(restored.stdout) as { replaced: string }).replaced);
    try {
      for (const [sessionId, seq] of acked) {
        const read = await readWholeLog(aside, sessionId);
        if (read.status !== "ok") throw new Error(`${sessionId}: ${read.status}`);
        expect(read.events.length).toBeGreaterThanOrEqual(seq);
      }
    } finally {
      await aside.close();
    }
  });

  it("restores over a file SQLite cannot read, keeping it aside byte for byte", async () => {
    const dir = folder();
    const db = dir.file("sessions.db");
    writeFileSync(db, "not a database, whatever it once was\n".repeat(200));
    const damaged = readFileSync(db);
    const backup = await backupWith(dir, "monday", ["new1"]);

    const restored = await runCli(["restore", backup, "--db", db]);

    expect(restored.stderr).toBe("");
    expect(restored.code).toBe(0);
    expect(sessionIds(db)).toEqual(["new1"]);
    const aside = (JSON.parse(restored.stdout) as { replaced: string }).replaced;
    expect(readFileSync(aside).equals(damaged)).toBe(true);
  });

  it("refuses db_in_use while a host has the database open, and leaves it as it was", async () => {
    const dir = folder();
    const db = dir.file("sessions.db");
    await databaseWith(db, ["old1"]);
    const backup = await backupWith(dir, "monday", ["new1"]);
    const host = await startServe(["--db", db], { SESSIONMUX_PORT: "0", SESSIONMUX_TOKEN: "t" });
    if (host.exited !== undefined) throw new Error(host.stderr);
    let stopped = false;
    cleanups.push(async () => {
      if (!stopped) await host.stop();
    });
    const before = readdirSync(dir.path).sort();

    const refused = await runCli(["restore", backup, "--db", db]);

    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain("db_in_use");
    expect(readdirSync(dir.path).sort()).toEqual(before);
    await host.stop();
    stopped = true;
    expect(sessionIds(db)).toEqual(["old1"]);
    expect((await runCli(["restore", backup, "--db", db])).code).toBe(0);
    expect(sessionIds(db)).toEqual(["new1"]);
  });

  it("refuses a backup that is missing, no sessionmux database, damaged or from a newer build, touching nothing", async () => {
    const dir = folder();
    const db = dir.file("sessions.db");
    await databaseWith(db, ["old1"]);
    const original = readFileSync(db);

    const plain = dir.file("plain.db");
    const other = new Database(plain);
    other.exec("CREATE TABLE notes (text TEXT)");
    other.close();
    const text = dir.file("notes.txt");
    copyFileSync(new URL(import.meta.url), text);
    const damaged = await backupWith(dir, "damaged", ["new1"]);
    garble(damaged, 4096, 4096);
    const newer = await backupWith(dir, "newer", ["new1"]);
    const bump = new Database(newer);
    bump.pragma(`user_version = ${SCHEMA_VERSION + 1}`);
    bump.close();
    const before = readdirSync(dir.path).sort();

    const cases: [string, string][] = [
      [dir.file("missing.db"), "restore_backup_missing"],
      [plain, "restore_backup_invalid"],
      [text, "restore_backup_invalid"],
      [damaged, "restore_backup_invalid"],
      [newer, "restore_backup_newer"],
    ];
    for (const [backup, code] of cases) {
      const refused = await runCli(["restore", backup, "--db", db]);
      expect({ backup, code: refused.code, stderr: refused.stderr }).toMatchObject({
        code: 2,
        stderr: expect.stringContaining(`error: ${code}: `),
      });
      expect(refused.stderr).toContain(backup);
    }
    expect(readdirSync(dir.path).sort()).toEqual(before);
    expect(readFileSync(db).equals(original)).toBe(true);
  });

  it("refuses a PostgreSQL database sqlite_only and names pg_restore", async () => {
    const refused = await runCli([
      "restore",
      "dump.custom",
      "--db",
      "postgres://postgres@127.0.0.1:5432/test",
    ]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain("sqlite_only");
    expect(refused.stderr).toContain("pg_restore");
  });
});

function garble(path: string, at: number, length: number): void {
  const fd = openSync(path, "r+");
  try {
    writeSync(fd, Buffer.alloc(length, 0xff), 0, length, at);
  } finally {
    closeSync(fd);
  }
}

const appender = fileURLToPath(new URL("../store/fixtures/appender.ts", import.meta.url));

/** Runs the store's appender on `db` until it acknowledged a few events, kills it with SIGKILL, returns the acks. */
async function killedAppender(db: string): Promise<Map<string, number>> {
  const child = spawn(process.execPath, ["--import", "tsx", appender, db], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  const acked = new Map<string, number>();
  let out = "";
  const exited = new Promise((resolve) => child.once("exit", resolve));
  await new Promise<void>((resolve, reject) => {
    child.stdout.on("data", (chunk: Buffer) => {
      out += chunk.toString();
      const lines = out.split("\n");
      out = lines.pop() ?? "";
      for (const line of lines) {
        const [word, sessionId, seq] = line.split(" ");
        if (word === "ack" && sessionId)
          acked.set(sessionId, Math.max(acked.get(sessionId) ?? 0, Number(seq)));
      }
      if ([...acked.values()].reduce((a, b) => a + b, 0) >= 200) resolve();
    });
    void exited.then(() => reject(new Error("the appender exited before it was killed")));
  });
  child.kill("SIGKILL");
  await exited;
  return acked;
}
