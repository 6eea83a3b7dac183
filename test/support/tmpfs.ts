import { execFileSync } from "node:child_process";
import type { Cleanup } from "./cleanups.js";

/**
 * Mounts a tmpfs (`options`, e.g. `size=4m`) on `path` and has `cleanups` unmount it; false where
 * this process may not mount one (not root, or a container that forbids it), for the test to skip.
 * A file system of its own is what makes a full disk or a read-only mount real.
 */
export function mountTmpfs(path: string, options: string, cleanups: Cleanup[]): boolean {
  try {
    execFileSync("mount", ["-t", "tmpfs", "-o", options, "tmpfs", path], { stdio: "ignore" });
  } catch {
    return false;
  }
  cleanups.push(() => {
    execFileSync("umount", [path]);
  });
  return true;
}

/** Mounts `path` again with `options`: `ro`, `rw`, or a new `size=`. */
export function remount(path: string, options: string): void {
  execFileSync("mount", ["-o", `remount,${options}`, path], { stdio: "ignore" });
}
