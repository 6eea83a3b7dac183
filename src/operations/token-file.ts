import { randomBytes } from "node:crypto";
import { chmodSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { StartupError } from "./startup-error.js";

/** The admin token a host uses when none is configured, kept beside its database. */
export function tokenFilePath(dbPath: string): string {
  return join(dirname(dbPath), "sessionmux.token");
}

function mint(): string {
  return randomBytes(24).toString("base64url");
}

/**
 * Reads the kept token, minting it on first use, so a restart does not lock out open consoles.
 * The file is readable by its owner only (0600).
 */
export function readOrCreateToken(path: string): { token: string; created: boolean } {
  try {
    const token = readFileSync(path, "utf8").trim();
    if (token.length > 0) return { token, created: false };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw unreadable(path, err);
  }
  const token = mint();
  try {
    // `wx`: two hosts starting at once keep one token, the loser reads the winner's
    writeFileSync(path, `${token}\n`, { mode: 0o600, flag: "wx" });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "EEXIST") return readOrCreateToken(path);
    throw unreadable(path, err);
  }
  return { token, created: true };
}

/** Replaces the kept token (atomically: a host re-reading it sees the old or the new one, whole). */
export function rotateToken(path: string): string {
  const token = mint();
  const temp = `${path}.${process.pid}.tmp`;
  try {
    writeFileSync(temp, `${token}\n`, { mode: 0o600 });
    chmodSync(temp, 0o600);
    renameSync(temp, path);
  } catch (err) {
    throw unreadable(path, err);
  }
  return token;
}

function unreadable(path: string, cause: unknown): StartupError {
  const reason = cause instanceof Error ? cause.message : String(cause);
  return new StartupError("token_file_unreadable", `token file ${path}: ${reason}`, { cause });
}
