import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { SqliteSessionStore } from "../../src/store/sqlite-store.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { straceAvailable } from "../support/syscall-trace.js";
import { tempDir } from "../support/temp-dir.js";

const repo = fileURLToPath(new URL("../..", import.meta.url));
const cleanups = cleanupsAfterEach();

/** Runs `sessionmux <args>` under strace, recording its links and syncs (with paths) into `traceFile`. */
function tracedCli(args: string[], traceFile: string): Promise<number> {
  const trace = ["strace", "-f", "-qq", "-yy", "-e", "trace=link,linkat,fsync,fdatasync", "-o", traceFile];
  return new Promise((resolve) => {
    execFile(
      "strace",
      [...trace.slice(1), process.execPath, "--import", "tsx", "src/cli/main.ts", ...args],
      { cwd: repo, timeout: 60_000 },
      (error) => resolve(error ? (typeof error.code === "number" ? error.code : 1) : 0),
    );
  });
}

describe.skipIf(!straceAvailable())("sessionmux backup, durable once it exits", () => {
  it("syncs the copy and then the folder that names it, so a power cut after exit 0 keeps the backup", async () => {
    const dir = tempDir();
    cleanups.push(() => dir.remove());
    const db = dir.file("sessions.db");
    const store = SqliteSessionStore.open(db);
    await store.create({ sessionId: "s1", owner: "admin", model: "demo-fast" });
    await store.close();
    const target = dir.file("backup.db");
    const traceFile = dir.file("backup.trace");

    expect(await tracedCli(["backup", target, "--db", db], traceFile)).toBe(0);
    const lines = readFileSync(traceFile, "utf8").split("\n");
    const linked = lines.findIndex(
      (line) => /\blink(?:at)?\(/.test(line) && line.includes(`"${target}"`) && / = 0$/.test(line),
    );
    const syncedAfter = lines
      .slice(linked + 1)
      .some((line) => /\bf(data)?sync\(\d+<([^>]*)>\)\s+= 0$/.exec(line)?.[2] === dir.path);
    expect(linked, "the copy is linked into place").toBeGreaterThanOrEqual(0);
    // the link is an entry of the folder: without a sync of the folder after it, a power cut
    // could take the backup away after the command said it was made
    expect(syncedAfter, "the folder is synced after the link").toBe(true);
  });
});
