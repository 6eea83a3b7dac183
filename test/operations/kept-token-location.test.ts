import { existsSync, mkdirSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { keptTokenFile } from "../../src/operations/kept-token-location.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { tempDir } from "../support/temp-dir.js";
import { thrownRefusal } from "./startup-refusal.js";

/**
 * Where a host keeps the admin token it mints: beside its SQLite file, or in the data folder for
 * PostgreSQL (created only when asked; a file in its place is refused).
 */

const cleanups = cleanupsAfterEach();
const postgres = { kind: "postgres", url: "postgres://127.0.0.1:5432/test", schema: "public" } as const;

function folder(): ReturnType<typeof tempDir> {
  const dir = tempDir("sessionmux-kept-token-");
  cleanups.push(() => dir.remove());
  return dir;
}

describe("keptTokenFile", () => {
  it("keeps a SQLite host's token beside its database file, whatever the data folder", () => {
    const dir = folder();
    const db = join(dir.path, "sub", "..", "sessions.db");
    const unused = dir.file("no-such-data-dir");
    expect(keptTokenFile({ kind: "sqlite", path: db }, unused, { createFolder: false })).toBe(
      dir.file("sessionmux.token"),
    );
    expect(existsSync(unused)).toBe(false);
  });

  it("keeps a PostgreSQL host's token in the data folder, resolved", () => {
    const dir = folder();
    mkdirSync(dir.file("data"));
    expect(keptTokenFile(postgres, join(dir.path, "x", "..", "data"), { createFolder: false })).toBe(
      dir.file(join("data", "sessionmux.token")),
    );
  });

  it("refuses a missing data folder, naming it, unless told to create it; then creates the folders above it too", () => {
    const dir = folder();
    const data = dir.file(join("one", "two"));
    const err = thrownRefusal(() => keptTokenFile(postgres, data, { createFolder: false }));
    expect(err.code).toBe("db_folder_missing");
    expect(err.message).toBe(
      `data folder ${data} does not exist (it keeps the admin token); create it or fix --data-dir`,
    );
    expect(existsSync(dir.file("one"))).toBe(false);

    expect(keptTokenFile(postgres, data, { createFolder: true })).toBe(join(data, "sessionmux.token"));
    expect(statSync(data).isDirectory()).toBe(true);
    expect(existsSync(join(data, "sessionmux.token"))).toBe(false);
  });

  it("refuses a data folder that is a file, naming it, even when told to create folders", () => {
    const dir = folder();
    const data = dir.file("plain");
    writeFileSync(data, "not a folder");
    for (const createFolder of [false, true]) {
      const err = thrownRefusal(() => keptTokenFile(postgres, data, { createFolder }));
      expect(err.code).toBe("db_folder_missing");
      expect(err.message).toBe(`data folder ${data} is not a directory`);
    }
    expect(statSync(data).isFile()).toBe(true);
  });
});
