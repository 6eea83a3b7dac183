import { execFile } from "node:child_process";
import { readdirSync } from "node:fs";
import { fileURLToPath } from "node:url";
import Database from "better-sqlite3";
import { afterEach, describe, expect, it, vi } from "vitest";
import { SqliteSessionStore } from "../../src/store/sqlite-store.js";
import { userMessage } from "../store/open-store.js";
import { tempDir } from "../support/temp-dir.js";
import { readWholeLog } from "../support/whole-log.js";
import { runCli } from "./run-cli.js";

const WRITERS = 100;
/** Per writer; the writers stop earlier, once the backup is done. */
const MAX_APPENDS = 3000;

const dirs: { remove(): void }[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) dir.remove();
});

describe("sessionmux backup", () => {
  it("copies a database while 100 writers append: the copy is intact and holds every acknowledged event", async () => {
    const dir = tempDir();
    dirs.push(dir);
    const dbPath = dir.file("sessions.db");
    const store = SqliteSessionStore.open(dbPath);
    const ids = Array.from({ length: WRITERS }, (_, i) => `w${i}`);
    for (const sessionId of ids) await store.create({ sessionId, owner: "admin", model: "demo-fast" });

    const acked = new Map<string, number>(ids.map((id) => [id, 1]));
    let stop = false;
    const writers = ids.map(async (sessionId) => {
      for (let i = 0; i < MAX_APPENDS && !stop; i++) {
        const outcome = await store.append(sessionId, [
          { type: "session/renamed", data: { title: `t${i}` } },
        ]);
        if (outcome.status !== "appended") throw new Error(`append refused: ${outcome.status}`);
        acked.set(sessionId, outcome.events.at(-1)?.seq ?? 0);
      }
    });
    try {
      await vi.waitFor(() => expect(Math.min(...acked.values())).toBeGreaterThan(5), { timeout: 30_000 });
      const before = new Map(acked);
      const target = dir.file("backup.db");
      const result = await runCli(["backup", target, "--db", dbPath]);
      const during = [...acked].reduce((n, [id, seq]) => n + seq - (before.get(id) ?? 0), 0);
      stop = true;
      await Promise.all(writers);

      expect(result.stderr).toBe("");
      expect(result.code).toBe(0);
      expect(JSON.parse(result.stdout)).toMatchObject({ integrity: "ok", target });
      // the copy and nothing else beside the database
      expect(readdirSync(dir.path).filter((name) => name.startsWith("backup.db"))).toEqual(["backup.db"]);
      // the writers were really writing while the copy was taken
      expect(during).toBeGreaterThan(0);

      const copy = new Database(target, { readonly: true });
      try {
        expect(copy.pragma("integrity_check", { simple: true })).toBe("ok");
      } finally {
        copy.close();
      }
      const restored = SqliteSessionStore.open(target);
      try {
        for (const sessionId of ids) {
          const read = await readWholeLog(restored, sessionId);
          if (read.status !== "ok") throw new Error(`${sessionId}: ${read.status}`);
          const seqs = read.events.map((e) => e.seq);
          expect(seqs.length).toBeGreaterThanOrEqual(before.get(sessionId) ?? Number.POSITIVE_INFINITY);
          expect(seqs).toEqual(Array.from({ length: seqs.length }, (_, i) => i + 1));
        }
      } finally {
        await restored.close();
      }
    } finally {
      stop = true;
      await Promise.allSettled(writers);
      await store.close();
    }
  });

  it("refuses to overwrite a file and to read a database that does not exist", async () => {
    const dir = tempDir();
    dirs.push(dir);
    const missing = await runCli(["backup", dir.file("copy.db"), "--db", dir.file("nope/sessions.db")]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain("db_missing");
    expect(missing.stderr).toContain(dir.file("nope/sessions.db"));

    const dbPath = dir.file("sessions.db");
    await SqliteSessionStore.open(dbPath).close();
    const first = await runCli(["backup", dir.file("copy.db")], { SESSIONMUX_DB: dbPath });
    expect(first.code).toBe(0);
    const again = await runCli(["backup", dir.file("copy.db")], { SESSIONMUX_DB: dbPath });
    expect(again.code).toBe(2);
    expect(again.stderr).toContain("backup_target_exists");
  });

  it("a copy that fails midway (a full disk) leaves no target and nothing else behind", async () => {
    const dir = tempDir();
    dirs.push(dir);
    const dbPath = dir.file("sessions.db");
    const store = SqliteSessionStore.open(dbPath);
    await store.create({ sessionId: "big", owner: "admin", model: "demo-fast" });
    for (let i = 0; i < 40; i++) await store.append("big", [userMessage("x".repeat(20_000))]);
    await store.close();
    // files this process writes stop at 256 KiB: the copy of an 800 KiB database fails there
    const repo = fileURLToPath(new URL("../..", import.meta.url));
    const target = dir.file("copy.db");
    const failed = await new Promise<{ code: number; stderr: string }>((resolve) =>
      execFile(
        "bash",
        [
          "-c",
          'ulimit -f 256 && exec "$0" "$@"',
          process.execPath,
          "--import",
          "tsx",
          "src/cli/main.ts",
          "backup",
          target,
          "--db",
          dbPath,
        ],
        { cwd: repo, timeout: 60_000 },
        (error, _stdout, stderr) =>
          resolve({ code: error ? (typeof error.code === "number" ? error.code : 1) : 0, stderr }),
      ),
    );
    expect(failed.code).toBe(2);
    expect(failed.stderr).toContain("backup_failed");
    expect(failed.stderr).toContain(`nothing was written to ${target}`);
    expect(readdirSync(dir.path).filter((name) => name.startsWith("copy.db"))).toEqual([]);
    // and a later backup with room succeeds
    expect((await runCli(["backup", target, "--db", dbPath])).code).toBe(0);
  });
});
