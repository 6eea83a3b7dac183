import { randomBytes } from "node:crypto";
import { chmodSync, linkSync, readFileSync, renameSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { syncFolder, writeNewFileSynced } from "./durable-files.js";
import { StartupError } from "./startup-error.js";

/** The admin token a host uses when none is configured, kept beside its database. */
export function tokenFilePath(dbPath: string): string {
  return join(dirname(dbPath), "sessionmux.token");
}

function mint(): string {
  return randomBytes(24).toString("base64url");
}

/** The kept token, or undefined when the file is missing or holds none (empty, blank). */
function readToken(path: string): string | undefined {
  try {
    const token = readFileSync(path, "utf8").trim();
    return token.length > 0 ? token : undefined;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw unreadable(path, err);
  }
}

/**
 * Reads the kept token, minting it on first use, so a restart does not lock out open consoles.
 * The file is readable by its owner only (0600). It appears whole (written and synced beside it,
 * then linked into place, the folder synced), so a crash or a power cut never leaves it empty; one found empty (a crash of an earlier
 * build, a user's edit) is replaced by a new token.
 */
export function readOrCreateToken(path: string): { token: string; created: boolean } {
  const kept = readToken(path);
  if (kept !== undefined) return { token: kept, created: false };
  const token = mint();
  const temp = tempBeside(path);
  try {
    writeNewFileSynced(temp, `${token}\n`, 0o600);
    try {
      // fails if the file exists: two hosts starting at once keep one token, the loser reads it
      linkSync(temp, path);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      const theirs = readToken(path);
      if (theirs !== undefined) return { token: theirs, created: false };
      renameSync(temp, path);
    }
    syncFolder(dirname(path));
  } catch (err) {
    throw err instanceof StartupError ? err : unreadable(path, err);
  } finally {
    rmSync(temp, { force: true });
  }
  return { token, created: true };
}

/**
 * Replaces the kept token (atomically: a host re-reading it sees the old or the new one, whole).
 * A rotation that fails leaves no copy of the new secret beside the file, and one killed before
 * it could clean up leaves a name no later rotation writes through.
 */
export function rotateToken(path: string): string {
  const token = mint();
  const temp = tempBeside(path);
  try {
    writeNewFileSynced(temp, `${token}\n`, 0o600);
    chmodSync(temp, 0o600);
    renameSync(temp, path);
    // once the command says the old token is refused, a restart after a power cut must agree
    syncFolder(dirname(path));
  } catch (err) {
    throw unreadable(path, err);
  } finally {
    rmSync(temp, { force: true });
  }
  return token;
}

function tempBeside(path: string): string {
  return `${path}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`;
}

function unreadable(path: string, cause: unknown): StartupError {
  const reason = cause instanceof Error ? cause.message : String(cause);
  return new StartupError("token_file_unreadable", `token file ${path}: ${reason}`, { cause });
}
