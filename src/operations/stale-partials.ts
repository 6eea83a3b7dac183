import { readdirSync, rmSync } from "node:fs";
import { join } from "node:path";

/**
 * The files a command writes under a temporary name before it puts them in place:
 * `<name>.<pid>.<suffix>` (a backup's `.partial`, a restore's `.restoring`), with the `-wal`,
 * `-shm` or `-journal` SQLite may leave beside one.
 */
export type PartialSuffix = "partial" | "restoring";

export function partialName(path: string, suffix: PartialSuffix, pid = process.pid): string {
  return `${path}.${pid}.${suffix}`;
}

/**
 * Removes from `folder` the temporary files of `suffix` that a killed command left: those whose
 * process is gone. A file of a command still running (another backup into the same folder) is
 * left alone, as is this process's own. Returns the names removed.
 */
export function removeStalePartials(folder: string, suffix: PartialSuffix): string[] {
  const pattern = new RegExp(`^.+\\.(\\d+)\\.${suffix}(?:-wal|-shm|-journal)?$`);
  const removed: string[] = [];
  let names: string[];
  try {
    names = readdirSync(folder);
  } catch {
    // a folder that cannot be listed holds nothing this command could clear; its own write reports why
    return removed;
  }
  for (const name of names) {
    const pid = Number(pattern.exec(name)?.[1]);
    if (!Number.isSafeInteger(pid) || pid === process.pid || isRunning(pid)) continue;
    rmSync(join(folder, name), { force: true });
    removed.push(name);
  }
  return removed;
}

/** Whether a process of that id runs now (one this process may not signal runs too). */
function isRunning(pid: number): boolean {
  if (pid <= 0) return true;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code !== "ESRCH";
  }
}
