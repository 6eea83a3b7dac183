import { spawn } from "node:child_process";
import { readdirSync, writeFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { removeStalePartials } from "../../src/operations/stale-partials.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { tempDir } from "../support/temp-dir.js";

const cleanups = cleanupsAfterEach();

/** A process id no process has now: one of a child that has exited. */
async function deadPid(): Promise<number> {
  const child = spawn(process.execPath, ["-e", ""], { stdio: "ignore" });
  await new Promise((resolve) => child.once("exit", resolve));
  return child.pid ?? -1;
}

describe("removeStalePartials", () => {
  it("removes the files of a process that is gone, and keeps those of running ones and other files", async () => {
    const dir = tempDir();
    cleanups.push(() => dir.remove());
    const running = spawn(process.execPath, ["-e", "setTimeout(() => {}, 60_000)"], { stdio: "ignore" });
    cleanups.push(() => void running.kill("SIGKILL"));
    const dead = await deadPid();
    const names = [
      `a.db.${dead}.partial`,
      `a.db.${dead}.partial-wal`,
      `a.db.${dead}.partial-journal`,
      `a.db.${running.pid}.partial`,
      `a.db.${process.pid}.partial`,
      `a.db.${dead}.restoring`,
      "a.db.partial",
      `notes.${dead}.partial.txt`,
    ];
    for (const name of names) writeFileSync(dir.file(name), "x");

    const removed = removeStalePartials(dir.path, "partial");

    expect(removed.sort()).toEqual(names.slice(0, 3).sort());
    expect(readdirSync(dir.path).sort()).toEqual(names.slice(3).sort());
  });
});
