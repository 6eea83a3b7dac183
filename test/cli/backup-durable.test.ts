import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { SqliteSessionStore } from "../../src/store/sqlite-store.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { straceAvailable } from "../support/syscall-trace.js";
import { tempDir } from "../support/temp-dir.js";
import { runCliTraced } from "./run-cli.js";

const cleanups = cleanupsAfterEach();

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

    expect(
      await runCliTraced(["backup", target, "--db", db], traceFile, ["link", "linkat", "fsync", "fdatasync"]),
    ).toBe(0);
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
