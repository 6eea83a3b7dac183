import { existsSync, mkdirSync, statSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { existingDatabase, prepareDatabasePath } from "../../src/operations/database-path.js";
import { StartupError } from "../../src/operations/startup-error.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { tempDir } from "../support/temp-dir.js";
import { thrownRefusal } from "./startup-refusal.js";

/**
 * Where a host's SQLite database lives: the path `--db` names, resolved, in a folder that exists
 * (created only when asked), and, for the commands that work on an existing database, a file that
 * is there.
 */

const cleanups = cleanupsAfterEach();

function folder(): ReturnType<typeof tempDir> {
  const dir = tempDir("sessionmux-db-path-");
  cleanups.push(() => dir.remove());
  return dir;
}

describe("prepareDatabasePath", () => {
  it("keeps an in-memory database as it is, without resolving it against the working folder", () => {
    expect(prepareDatabasePath(":memory:")).toBe(":memory:");
    expect(prepareDatabasePath(":memory:", { createFolder: true })).toBe(":memory:");
    expect(existsSync(resolve(":memory:"))).toBe(false);
  });

  it("resolves a path in a folder that exists, and creates nothing", () => {
    const dir = folder();
    const relative = join(dir.path, "a", "..", "sessions.db");
    expect(prepareDatabasePath(relative)).toBe(dir.file("sessions.db"));
    expect(existsSync(dir.file("sessions.db"))).toBe(false);
  });

  it("refuses a missing folder, naming it, the database and both ways to create it, and creates nothing", () => {
    const dir = folder();
    const missing = dir.file("misspelled");
    const file = join(missing, "sessions.db");
    const err = thrownRefusal(() => prepareDatabasePath(file));
    expect(err.code).toBe("db_folder_missing");
    expect(err.message).toBe(
      `database folder ${missing} does not exist (database ${file}); create it, fix the path, ` +
        "or pass --create-db-folder (createDbFolder: true) to create it",
    );
    expect(existsSync(missing)).toBe(false);
    expect(() => prepareDatabasePath(file, { createFolder: false })).toThrow(StartupError);
    expect(existsSync(missing)).toBe(false);
  });

  it("refuses a path naming a folder, for the host and for the commands on an existing database, saying to name the file in it", () => {
    const dir = folder();
    const data = dir.file("data");
    mkdirSync(data);
    for (const open of [() => prepareDatabasePath(data), () => existingDatabase(data)]) {
      const err = thrownRefusal(open);
      expect(err.code).toBe("db_option_invalid");
      expect(err.message).toBe(
        `${data} is a folder, not a database file; name the file in it (for example ${data}/sessions.db)`,
      );
    }
  });

  it("creates a missing folder, and the folders above it, when asked", () => {
    const dir = folder();
    const file = dir.file(join("one", "two", "sessions.db"));
    expect(prepareDatabasePath(file, { createFolder: true })).toBe(file);
    expect(statSync(dir.file(join("one", "two"))).isDirectory()).toBe(true);
    expect(existsSync(file)).toBe(false);
  });

  it("refuses a folder that is a file, naming it, even when asked to create folders", () => {
    const dir = folder();
    const notAFolder = dir.file("plain");
    writeFileSync(notAFolder, "not a folder");
    const file = join(notAFolder, "sessions.db");
    for (const options of [{}, { createFolder: true }]) {
      const err = thrownRefusal(() => prepareDatabasePath(file, options));
      expect(err.code).toBe("db_folder_missing");
      expect(err.message).toBe(`database folder ${notAFolder} is not a directory`);
    }
    expect(statSync(notAFolder).isFile()).toBe(true);
  });
});

describe("existingDatabase", () => {
  it("resolves the path of a database that is there", () => {
    const dir = folder();
    writeFileSync(dir.file("sessions.db"), "");
    expect(existingDatabase(join(dir.path, "x", "..", "sessions.db"))).toBe(dir.file("sessions.db"));
  });

  it("refuses a path with no file, naming it and the option that sets it, and creates nothing", () => {
    const dir = folder();
    mkdirSync(dir.file("empty"));
    const file = dir.file(join("empty", "sessions.db"));
    const err = thrownRefusal(() => existingDatabase(file));
    expect(err.code).toBe("db_missing");
    expect(err.message).toBe(
      `no database at ${file}; check --db (or SESSIONMUX_DB), or start 'sessionmux serve' once to create a new one`,
    );
    expect(existsSync(file)).toBe(false);
  });
});
