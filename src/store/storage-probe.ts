import type Database from "better-sqlite3";
import type { WriteOperation } from "./group-commit.js";

/** About two pages of 4 KiB: enough that the write needs pages the file may not have room for. */
const PROBE_BYTES = 8192;

/**
 * A write that needs room, as an append does, and leaves nothing behind: inside the group commit's
 * transaction it stores a row under a key no prompt can have (an empty session id), in fresh
 * pages, and deletes it again. It commits only when storage takes writes again, which is what
 * `/readyz` waits for after writes failed, whether or not anyone else writes meanwhile.
 */
export function storageProbe(db: Database.Database): WriteOperation<void> {
  const insert = db.prepare(
    "INSERT OR REPLACE INTO prompt_keys (session_id, client_message_id, record) VALUES ('', 'storage-probe', zeroblob(?))",
  );
  const remove = db.prepare(
    "DELETE FROM prompt_keys WHERE session_id = '' AND client_message_id = 'storage-probe'",
  );
  return () => {
    insert.run(PROBE_BYTES);
    remove.run();
  };
}
