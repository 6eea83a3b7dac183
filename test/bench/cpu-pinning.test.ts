import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { availableParallelism, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const CHILD = fileURLToPath(new URL("./cpu-pinning-child.ts", import.meta.url));
const hasTaskset = spawnSync("taskset", ["-c", "-p", String(process.pid)]).status === 0;

/** What the child saw: whether pinning took, and the CPU lists before, while and after. */
function runChild(env: NodeJS.ProcessEnv = process.env) {
  const run = spawnSync(process.execPath, ["--import", "tsx", CHILD], {
    encoding: "utf8",
    timeout: 30_000,
    env,
  });
  expect(run.status, run.stderr).toBe(0);
  return JSON.parse(run.stdout) as {
    applied: boolean;
    before?: string;
    pinned: { self?: string; follower?: string };
    after: { self?: string; follower?: string };
  };
}

describe("pinServers", () => {
  it.runIf(hasTaskset && availableParallelism() >= 2)(
    "puts the process on CPU 0 and its followers on the last CPU until undone, then gives the CPUs back",
    () => {
      const seen = runChild();
      expect(seen.applied).toBe(true);
      expect(seen.pinned).toEqual({ self: "0", follower: String(availableParallelism() - 1) });
      // undone: the process has its CPUs back, and a follower started since keeps what it inherits
      expect(seen.after).toEqual({ self: seen.before, follower: seen.before });
    },
  );

  it("says it pinned nothing where taskset is missing, so no report calls such a run pinned", () => {
    // a PATH with `sleep` (the child's follower) and no `taskset`
    const bin = mkdtempSync(join(tmpdir(), "no-taskset-"));
    try {
      const sleep = spawnSync("sh", ["-c", "command -v sleep"], { encoding: "utf8" }).stdout.trim();
      symlinkSync(sleep, join(bin, "sleep"));
      const seen = runChild({ ...process.env, PATH: bin });
      expect(seen.applied).toBe(false);
    } finally {
      rmSync(bin, { recursive: true, force: true });
    }
  });
});
