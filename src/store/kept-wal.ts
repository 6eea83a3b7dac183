import { constants, copyFileSync, existsSync, renameSync, rmSync, statSync } from "node:fs";

/**
 * Runs `work` (which opens the database at `path` and closes it again if it fails) so that a
 * failure leaves the database's write-ahead log where it was. SQLite removes the `-wal` file when
 * the last connection closes, also one that could not read the database ("file is not a
 * database", a damaged first page): the commits only the WAL held, the newest ones, would be gone
 * with a refusal that says nothing was changed. So a WAL holding frames is copied first (a clone
 * where the file system can), put back if `work` throws and took it, and dropped once `work`
 * returns. A process killed between SQLite's removal and the copy's return leaves the copy as
 * `<path>-wal.<pid>.kept` beside the database, for whoever salvages it.
 */
export function keepingWal<T>(path: string, work: () => T): T {
  const wal = `${path}-wal`;
  if (!holdsFrames(wal)) return work();
  const kept = `${wal}.${process.pid}.kept`;
  copyFileSync(wal, kept, constants.COPYFILE_FICLONE);
  try {
    const result = work();
    rmSync(kept);
    return result;
  } catch (err) {
    // another process with the database open keeps its WAL in use: it is left to that process
    if (existsSync(wal)) rmSync(kept);
    else renameSync(kept, wal);
    throw err;
  }
}

/** True when a WAL file is there with more than its header: frames its database lacks. */
export function holdsFrames(wal: string): boolean {
  return existsSync(wal) && statSync(wal).size > 32;
}
