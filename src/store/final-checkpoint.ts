import type Database from "better-sqlite3";
import type { StoreFaultLog } from "./commit-listeners.js";
import { isWriteRefused } from "./io-errors.js";

/** The `code` of the process warning a failed final checkpoint raises when the store has no log. */
export const CHECKPOINT_WARNING_CODE = "SESSIONMUX_FINAL_CHECKPOINT";

/**
 * The checkpoint a store runs as it closes, moving the WAL into the database file. On a full or
 * read-only disk it cannot, yet nothing committed is lost: that is a warning naming the reason
 * (a shutdown still succeeds), not a failure. Anything else (a damaged file, say) still throws.
 */
export function finalCheckpoint(db: Database.Database, log: StoreFaultLog | undefined): void {
  try {
    db.pragma("wal_checkpoint(TRUNCATE)");
  } catch (err) {
    // SQLite resets the WAL only after the database file took every page and was synced, so each
    // committed transaction is still in the WAL, and the next open checkpoints it
    if (!isWriteRefused(err)) throw err;
    const msg =
      "the final checkpoint failed: storage took no more writes; every committed write stays in the WAL beside the database and is checkpointed at its next open";
    const code = (err as { code?: string }).code;
    if (log?.warn) log.warn({ err, wal: `${db.name}-wal` }, msg);
    else
      process.emitWarning(`${msg} (${code}: ${(err as Error).message})`, { code: CHECKPOINT_WARNING_CODE });
  }
}
