import { execFileSync, spawn } from "node:child_process";
import { statSync } from "node:fs";
import { fileURLToPath } from "node:url";
import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { SessionmuxError } from "../../protocol/index.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { MuxPeer } from "../support/mux-peer.js";
import { tempDir } from "../support/temp-dir.js";
import { until } from "../support/until.js";

/**
 * `sessionmux serve` stopped while its disk is full. It runs in a child process whose files may
 * not grow past 1 MiB (`ulimit -S -f`: the same EFBIG a full disk's ENOSPC is to SQLite, for this
 * process alone and without root), so the final checkpoint, which copies the WAL into the
 * database file, has no room either.
 */

const cleanups = cleanupsAfterEach();
const repo = fileURLToPath(new URL("../..", import.meta.url));
const MAX_RENAMES = 5_000;

function limitedServe(db: string) {
  const child = spawn(
    "bash",
    [
      "-c",
      'ulimit -S -f 1024 && exec "$0" "$@"',
      process.execPath,
      "--import",
      "tsx",
      "src/cli/main.ts",
      "serve",
      "--db",
      db,
      "--host",
      "127.0.0.1",
      "--port",
      "0",
      "--token",
      "s",
    ],
    { cwd: repo, stdio: ["ignore", "pipe", "pipe"] },
  );
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  cleanups.push(async () => {
    child.kill("SIGKILL");
    await exited;
  });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  return {
    pid: child.pid ?? -1,
    url: () => until(() => /listening on (\S+)/.exec(stdout)?.[1], 60_000, "serve to listen"),
    async stop(): Promise<{ code: number | null; stderr: string }> {
      child.kill("SIGTERM");
      return { code: await exited, stderr };
    },
  };
}

describe("serve stopped on a full disk", () => {
  it("exits 0 with a warning naming the failed checkpoint, and every committed write is there at the next open", async () => {
    const dir = tempDir();
    cleanups.push(() => dir.remove());
    const db = dir.file("sessions.db");
    const host = limitedServe(db);
    const url = await host.url();
    const peer = await MuxPeer.connect(`${url.replace("http", "ws")}/api/remote.mux`, { token: "s" });
    cleanups.push(() => peer.ws.terminate());
    await peer.call("session.create", { sessionId: "full" });

    let lastTitle = "";
    const fill = async () => {
      let failure: SessionmuxError | undefined;
      for (let i = 0; i < MAX_RENAMES && !failure; i++) {
        const title = `${i} ${"x".repeat(500)}`;
        await peer.call("session.rename", { sessionId: "full", title }).then(
          () => (lastTitle = title),
          (err) => {
            if (!(err instanceof SessionmuxError)) throw err;
            failure = err;
          },
        );
      }
      expect(failure?.code).toBe("persistence_failure");
    };
    await fill();
    // the disk full for every file now: not even the database file may grow past its size
    execFileSync("prlimit", ["--pid", String(host.pid), `--fsize=${statSync(db).size}:`]);
    peer.ws.terminate();

    const { code, stderr } = await host.stop();
    const lines = stderr
      .split("\n")
      .filter((line) => line.startsWith("{"))
      .map(
        (line) => JSON.parse(line) as { level: number; msg: string; wal?: string; err?: { code?: string } },
      );
    const warning = lines.find((line) => /final checkpoint/.test(line.msg));
    expect(warning).toMatchObject({
      level: 40,
      wal: `${db}-wal`,
      err: { code: expect.stringMatching(/^SQLITE_(IOERR|FULL)/) },
    });
    expect(warning?.msg).toMatch(/every committed write stays in the WAL/);
    expect(lines.filter((line) => line.level >= 50).map((line) => line.msg)).not.toContain("shutdown failed");
    expect(code).toBe(0);

    // nothing acknowledged was lost: the WAL left beside the file holds it
    const reader = new Database(db, { readonly: true });
    try {
      const row = reader.prepare("SELECT title FROM projections WHERE session_id = 'full'").get();
      expect(row).toEqual({ title: lastTitle });
      expect(reader.pragma("integrity_check", { simple: true })).toBe("ok");
    } finally {
      reader.close();
    }
  }, 180_000);
});
