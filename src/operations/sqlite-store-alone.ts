import { SqliteSessionStore } from "../store/sqlite-store.js";
import { existingDatabase } from "./database-path.js";
import { assertNotInUse, inUseRefusal } from "./exclusive-access.js";
import { sqliteOpenRefusal } from "./sqlite-open-refusal.js";
import { StartupError } from "./startup-error.js";

/**
 * The store of an existing SQLite database that no host has open, for a command that works on it
 * alone (migrate, rebuild-projections; opening applies the migrations). Refused as a host's start
 * refuses the file: `db_missing`, `db_in_use` (a host has it, or took it since the check), and
 * `db_unwritable` or `db_unreadable` saying what to check when SQLite cannot open it.
 */
export function openSqliteStoreAlone(path: string): SqliteSessionStore {
  const file = existingDatabase(path);
  try {
    assertNotInUse(file);
    return SqliteSessionStore.open(file);
  } catch (err) {
    if (err instanceof StartupError) throw err;
    throw inUseRefusal(err) ?? sqliteOpenRefusal(file, err);
  }
}
