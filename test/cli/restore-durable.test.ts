import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { SqliteSessionStore } from "../../src/store/sqlite-store.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { straceAvailable } from "../support/syscall-trace.js";
import { tempDir } from "../support/temp-dir.js";
import { runCli, runCliTraced } from "./run-cli.js";

const cleanups = cleanupsAfterEach();

describe.skipIf(!straceAvailable())("sessionmux restore, durable once it exits", () => {
  it("syncs the copy before renaming it over the database, and the folder after", async () => {
    const dir = tempDir();
    cleanups.push(() => dir.remove());
    const db = dir.file("sessions.db");
    const source = dir.file("source.db");
    for (const path of [db, source]) {
      const store = SqliteSessionStore.open(path);
      await store.create({ sessionId: "s1", owner: "admin", model: "demo-fast" });
      await store.close();
    }
    const backup = dir.file("backup.db");
    expect((await runCli(["backup", backup, "--db", source])).code).toBe(0);
    const traceFile = dir.file("restore.trace");

    expect(
      await runCliTraced(["restore", backup, "--db", db], traceFile, [
        "rename",
        "renameat",
        "renameat2",
        "fsync",
        "fdatasync",
      ]),
    ).toBe(0);
    const lines = readFileSync(traceFile, "utf8").split("\n");
    const copy = /\brename(?:at2?)?\(.*"([^"]+\.restoring)".*"([^"]+)".* = 0$/;
    const renamed = lines.findIndex((line) => copy.exec(line)?.[2] === db);
    expect(renamed, "the copy is renamed over the database").toBeGreaterThanOrEqual(0);
    const copyPath = copy.exec(lines[renamed]!)?.[1];
    const synced = (line: string) => /\bf(?:data)?sync\(\d+<([^>]*)>\)\s+= 0$/.exec(line)?.[1];
    // a rename of a file whose pages are not on disk yet can leave an empty database after a power cut
    expect(
      lines.slice(0, renamed).some((line) => synced(line) === copyPath),
      "the copy synced first",
    ).toBe(true);
    // the rename is an entry of the folder: durable once the folder is synced
    expect(
      lines.slice(renamed + 1).some((line) => synced(line) === dir.path),
      "the folder synced after",
    ).toBe(true);
  });
});
