import { SessionmuxError } from "../../protocol/index.js";

// Result codes that mean the storage itself failed (full, read-only, I/O, corruption, locked by
// another process), as opposed to a fault in one operation's data.
const STORAGE_CODES = [
  "SQLITE_FULL",
  "SQLITE_IOERR",
  "SQLITE_READONLY",
  "SQLITE_CANTOPEN",
  "SQLITE_BUSY",
  "SQLITE_LOCKED",
  "SQLITE_CORRUPT",
  "SQLITE_NOTADB",
  "SQLITE_NOMEM",
  "SQLITE_PROTOCOL",
  "SQLITE_NOLFS",
];

// Storage refusing to take a write: no room (a full disk, a file size limit), storage turned
// read-only, a write or sync that failed. Reads of what is there still work.
const REFUSED_WRITE_CODES = new Set([
  "SQLITE_FULL",
  "SQLITE_READONLY",
  "SQLITE_IOERR_WRITE",
  "SQLITE_IOERR_FSYNC",
  "SQLITE_IOERR_DIR_FSYNC",
  "SQLITE_IOERR_TRUNCATE",
]);

export function isWriteRefused(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === "string" && (REFUSED_WRITE_CODES.has(code) || code.startsWith("SQLITE_READONLY_"));
}

/** SQLite cannot read the file as a database: damaged (`SQLITE_CORRUPT…`) or not one (`SQLITE_NOTADB`). */
export function isUnreadableDatabase(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === "string" && /^SQLITE_(CORRUPT|NOTADB)/.test(code);
}

export function isStorageFailure(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return (
    typeof code === "string" &&
    STORAGE_CODES.some((prefix) => code === prefix || code.startsWith(`${prefix}_`))
  );
}

/** What a caller sees when the database could not do its part; retryable once storage recovers. */
export function persistenceFailure(err: unknown): SessionmuxError {
  const code = (err as { code?: unknown } | null)?.code;
  return new SessionmuxError("persistence_failure", "the session store could not write; retry later", {
    data: typeof code === "string" ? { sqlite: code } : undefined,
    cause: err,
  });
}
