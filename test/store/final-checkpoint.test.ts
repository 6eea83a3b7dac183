import type Database from "better-sqlite3";
import { afterEach, describe, expect, it, vi } from "vitest";
import { CHECKPOINT_WARNING_CODE, finalCheckpoint } from "../../src/store/final-checkpoint.js";

/**
 * The checkpoint a store runs as it closes: one that storage refused (no room, read-only) lost
 * nothing, and is a warning; any other failure (a damaged file) still fails the close.
 */

const failing = (code: string, message: string) =>
  ({
    name: "/data/sessions.db",
    pragma() {
      throw Object.assign(new Error(message), { code });
    },
  }) as unknown as Database.Database;

afterEach(() => {
  vi.restoreAllMocks();
});

describe("finalCheckpoint", () => {
  it("warns, naming the failure and the WAL, when storage refused the checkpoint's writes", () => {
    const warn = vi.fn();
    const error = vi.fn();
    for (const code of [
      "SQLITE_FULL",
      "SQLITE_IOERR_WRITE",
      "SQLITE_READONLY",
      "SQLITE_READONLY_DIRECTORY",
    ]) {
      finalCheckpoint(failing(code, "no room"), { warn, error });
    }
    expect(error).not.toHaveBeenCalled();
    expect(warn).toHaveBeenCalledTimes(4);
    const [fields, msg] = warn.mock.calls[0] as [{ err: { code: string }; wal: string }, string];
    expect(fields.err.code).toBe("SQLITE_FULL");
    expect(fields.wal).toBe("/data/sessions.db-wal");
    expect(msg).toMatch(/^the final checkpoint failed: .*every committed write stays in the WAL/);
  });

  it("without a log that warns, raises a process warning with the failure's code and words", () => {
    const emit = vi.spyOn(process, "emitWarning").mockImplementation(() => undefined);
    finalCheckpoint(failing("SQLITE_FULL", "database or disk is full"), { error: vi.fn() });
    expect(emit).toHaveBeenCalledWith(expect.stringMatching(/\(SQLITE_FULL: database or disk is full\)$/), {
      code: CHECKPOINT_WARNING_CODE,
    });
  });

  it("throws any other failure, so the close fails", () => {
    const warn = vi.fn();
    for (const code of ["SQLITE_CORRUPT", "SQLITE_NOTADB", "SQLITE_IOERR_READ"]) {
      expect(() => finalCheckpoint(failing(code, "damaged"), { warn, error: vi.fn() })).toThrow("damaged");
    }
    expect(warn).not.toHaveBeenCalled();
  });
});
