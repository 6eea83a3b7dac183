import { spawnSync } from "node:child_process";
import { availableParallelism } from "node:os";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const CHILD = fileURLToPath(new URL("./cpu-pinning-child.ts", import.meta.url));
const hasTaskset = spawnSync("taskset", ["-c", "-p", String(process.pid)]).status === 0;

describe("pinServers", () => {
  it.runIf(hasTaskset && availableParallelism() >= 2)(
    "puts the process on CPU 0 and its followers on the last CPU until undone, then gives the CPUs back",
    () => {
      const run = spawnSync(process.execPath, ["--import", "tsx", CHILD], {
        encoding: "utf8",
        timeout: 30_000,
      });
      expect(run.status, run.stderr).toBe(0);
      const seen = JSON.parse(run.stdout) as {
        before: string;
        pinned: { self: string; follower: string };
        after: { self: string; follower: string };
      };
      expect(seen.pinned).toEqual({ self: "0", follower: String(availableParallelism() - 1) });
      // undone: the process has its CPUs back, and a follower started since keeps what it inherits
      expect(seen.after).toEqual({ self: seen.before, follower: seen.before });
    },
  );
});
