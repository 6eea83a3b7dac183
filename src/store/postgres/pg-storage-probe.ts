import { randomBytes } from "node:crypto";
import type { PgWriteOperation } from "./pg-write-operations.js";

/** About a page of 8 KiB, of bytes no compression shrinks, so the write needs room as an append does. */
const PROBE_BYTES = 8192;

const INSERT_PROBE = `INSERT INTO prompt_keys (session_id, client_message_id, record) VALUES ('', 'storage-probe', $1)
  ON CONFLICT (session_id, client_message_id) DO UPDATE SET record = excluded.record`;
const DELETE_PROBE = "DELETE FROM prompt_keys WHERE session_id = '' AND client_message_id = 'storage-probe'";

/**
 * The PostgreSQL twin of `storageProbe`: inside a group-commit transaction it stores a row under a
 * key no prompt can have (an empty session id) and deletes it again, so it commits, leaving
 * nothing, only once the database takes writes again (room on its disk, no longer read-only).
 */
export function pgStorageProbe(): PgWriteOperation<void> {
  return {
    sessions: [],
    async run(batch) {
      await batch.execute(INSERT_PROBE, [randomBytes(PROBE_BYTES)]);
      await batch.execute(DELETE_PROBE, []);
    },
  };
}
