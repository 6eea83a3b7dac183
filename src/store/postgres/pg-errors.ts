import { SessionmuxError } from "../../../protocol/index.js";

// SQLSTATE classes that mean the database as a whole could not do its part (connection lost,
// out of disk or memory, shutting down, read-only standby), as opposed to a fault in one
// operation's data: 08 connection, 53 insufficient resources, 57 operator intervention,
// 58 system error, XX internal, 25006 read-only transaction.
const STORAGE_CLASSES = ["08", "53", "57", "58", "XX"];
const STORAGE_CODES = new Set(["25006"]);
/** The transaction lost a race (deadlock, serialization): retrying it alone is expected to work. */
const RETRY_CODES = new Set(["40001", "40P01"]);

export function isPgStorageFailure(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  if (isSqlState(err) && typeof code === "string") {
    return STORAGE_CLASSES.includes(code.slice(0, 2)) || STORAGE_CODES.has(code);
  }
  // node errors of a lost socket (ECONNRESET, ECONNREFUSED; not node's own ERR_…) and pg's own "Connection terminated"
  if (typeof code === "string" && code.startsWith("E") && !code.startsWith("ERR_")) return true;
  return err instanceof Error && /connection terminated|not queryable|timeout/i.test(err.message);
}

/**
 * The connection under a statement failed (its socket's error, pg's "Connection terminated"), as
 * opposed to a SQLSTATE the server answered with: the server may never have seen the statement.
 */
export function isPgConnectionLost(err: unknown): boolean {
  return isPgStorageFailure(err) && !isSqlState(err);
}

export function isPgRetryable(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === "string" && RETRY_CODES.has(code);
}

/**
 * The database refused a batch's kept session states: a row was written since (see migration 6),
 * or the log grew past a kept head (its key refused the batch's seq, if that insert ran before the
 * check of the heads).
 */
export function isStaleKeptState(err: unknown): boolean {
  const { code, constraint } = (err ?? {}) as { code?: unknown; constraint?: unknown };
  return code === "SMX01" || (code === "23505" && constraint === "events_pkey");
}

/** What a caller sees when PostgreSQL could not do its part; retryable once it recovers. */
export function pgPersistenceFailure(
  err: unknown,
  message = "the session store could not write; retry later",
): SessionmuxError {
  const code = (err as { code?: unknown } | null)?.code;
  return new SessionmuxError("persistence_failure", message, {
    data: typeof code === "string" ? { postgres: code } : undefined,
    cause: err,
  });
}

const READ_FAILED = "the session store could not be read; retry later";

/**
 * A read as its caller sees it: one the database could not answer (its connection failed or could
 * not be made, the server is going away) rejects `persistence_failure`, which a client retries, a
 * read being idempotent; any other fault is left as it is.
 */
export function pgRead<T>(read: Promise<T>): Promise<T> {
  return read.catch((err: unknown) => {
    throw readFailure(err);
  });
}

/** The chunks of an upload as `pgRead` has a read fail: a chunk the database could not read is `persistence_failure`. */
export async function* pgReadChunks(chunks: AsyncIterable<Uint8Array>): AsyncGenerator<Uint8Array> {
  try {
    yield* chunks;
  } catch (err) {
    throw readFailure(err);
  }
}

function readFailure(err: unknown): unknown {
  return isPgStorageFailure(err) ? pgPersistenceFailure(err, READ_FAILED) : err;
}

/** A code the server sent (a SQLSTATE), not a socket's: five letters that name no system call. */
function isSqlState(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  // a socket's error may have five letters too (EPIPE, a write to a connection already cut): it
  // names the system call that failed, which no SQLSTATE the server sent does
  return typeof code === "string" && code.length === 5 && !isSystemError(err);
}

/** An error of a system call (a socket's read or write, a connect), as node raises it. */
function isSystemError(err: unknown): boolean {
  return err instanceof Error && typeof (err as { syscall?: unknown }).syscall === "string";
}
