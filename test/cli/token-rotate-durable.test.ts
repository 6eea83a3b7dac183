import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { SqliteSessionStore } from "../../src/store/sqlite-store.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { straceAvailable } from "../support/syscall-trace.js";
import { tempDir } from "../support/temp-dir.js";
import { runCliTraced } from "./run-cli.js";

const cleanups = cleanupsAfterEach();

/** The path an strace line's descriptor or first path argument names. */
const pathOf = (line: string) =>
  /\((?:\d+<([^>]*)>|"([^"]*)")/
    .exec(line)
    ?.slice(1)
    .find((p) => p !== undefined);

describe.skipIf(!straceAvailable())("sessionmux token rotate, durable once it exits", () => {
  it("syncs the new token before it replaces the old one, then the folder", async () => {
    const dir = tempDir();
    cleanups.push(() => dir.remove());
    const db = dir.file("sessions.db");
    await SqliteSessionStore.open(db).close();
    const file = dir.file("sessionmux.token");
    const traceFile = dir.file("rotate.trace");

    expect(
      await runCliTraced(["token", "rotate", "--db", db], traceFile, [
        "rename",
        "renameat",
        "renameat2",
        "fsync",
        "fdatasync",
      ]),
    ).toBe(0);
    const lines = readFileSync(traceFile, "utf8")
      .split("\n")
      .filter((line) => / = 0$/.test(line));
    const renamed = lines.findIndex((line) => /\brename(?:at2?)?\(/.test(line) && line.includes(`"${file}"`));
    expect(renamed, "the new token is renamed into place").toBeGreaterThanOrEqual(0);
    const temp = /"([^"]*\.tmp)"/.exec(lines[renamed] ?? "")?.[1];
    const syncs = (from: number, to: number) =>
      lines
        .slice(from, to)
        .filter((line) => /\bf(?:data)?sync\(/.test(line))
        .map(pathOf);
    // a power cut must leave the old token or the new one whole; and once the command said the
    // old one is refused, the new one is the one a restart reads
    expect(syncs(0, renamed), "the new token's file is synced before the rename").toContain(temp);
    expect(syncs(renamed + 1, lines.length), "the folder is synced after the rename").toContain(dir.path);
  });
});
