import {
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  statSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { describe, expect, it } from "vitest";
import { readOrCreateToken, rotateToken, tokenFilePath } from "../../src/operations/token-file.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { tempDir } from "../support/temp-dir.js";

/** The admin token a host keeps beside its database when none is configured. */

const cleanups = cleanupsAfterEach();

function folder() {
  const dir = tempDir();
  cleanups.push(() => dir.remove());
  return { dir, path: dir.file("sessionmux.token") };
}

const modeOf = (path: string) => statSync(path).mode & 0o777;

describe("the kept token", () => {
  it("is kept beside the database, as sessionmux.token", () => {
    expect(tokenFilePath("/var/lib/sessionmux/sessions.db")).toBe("/var/lib/sessionmux/sessionmux.token");
  });

  it("is minted once, readable by its owner only, and read back by every later start", () => {
    const { dir, path } = folder();
    const first = readOrCreateToken(path);
    expect(first.created).toBe(true);
    expect(first.token).toMatch(/^[A-Za-z0-9_-]{32}$/);
    expect(readFileSync(path, "utf8")).toBe(`${first.token}\n`);
    expect(modeOf(path)).toBe(0o600);
    expect(readOrCreateToken(path)).toEqual({ token: first.token, created: false });
    // nothing but the token file is left beside it
    expect(readdirSync(dir.path)).toEqual(["sessionmux.token"]);
  });

  it("an empty or blank file (a crash of an earlier build, a user's edit) gets a new token", () => {
    for (const content of ["", " \n\n"]) {
      const { dir, path } = folder();
      writeFileSync(path, content, { mode: 0o644 });
      const minted = readOrCreateToken(path);
      expect(minted.created).toBe(true);
      expect(readFileSync(path, "utf8")).toBe(`${minted.token}\n`);
      expect(modeOf(path)).toBe(0o600);
      expect(readdirSync(dir.path)).toEqual(["sessionmux.token"]);
    }
  });

  it("a path it cannot read is refused with token_file_unreadable, naming the file", () => {
    const { path } = folder();
    mkdirSync(path);
    expect(() => readOrCreateToken(path)).toThrow(
      expect.objectContaining({
        code: "token_file_unreadable",
        message: expect.stringContaining(path),
        cause: expect.objectContaining({ code: "EISDIR" }),
      }),
    );
  });

  it("a name that cannot be read as a file is refused and left as it is, not replaced by a new token", () => {
    // a symbolic link to a folder or to itself: replacing it would mint a token the operator
    // never asked for, and hide why the kept one could not be read
    for (const [target, code] of [
      [".", "EISDIR"],
      ["sessionmux.token", "ELOOP"],
    ] as const) {
      const { dir, path } = folder();
      symlinkSync(target, path);
      expect(() => readOrCreateToken(path)).toThrow(
        expect.objectContaining({ code: "token_file_unreadable", cause: expect.objectContaining({ code }) }),
      );
      expect(lstatSync(path).isSymbolicLink()).toBe(true);
      expect(readlinkSync(path)).toBe(target);
      expect(readdirSync(dir.path)).toEqual(["sessionmux.token"]);
    }
  });

  it("a start that finds its token writes nothing beside it (a folder mounted read-only still works)", () => {
    const { dir, path } = folder();
    const { token } = readOrCreateToken(path);
    // an hour ago: any file made and removed in the folder since moves its modification time
    const before = new Date(Date.now() - 3_600_000);
    utimesSync(dir.path, before, before);
    expect(readOrCreateToken(path)).toEqual({ token, created: false });
    expect(statSync(dir.path).mtime).toEqual(before);
  });

  it("rotation replaces the token whole, still readable by its owner only", () => {
    const { dir, path } = folder();
    const { token } = readOrCreateToken(path);
    const rotated = rotateToken(path);
    expect(rotated).not.toBe(token);
    expect(readOrCreateToken(path)).toEqual({ token: rotated, created: false });
    expect(modeOf(path)).toBe(0o600);
    expect(readdirSync(dir.path)).toEqual(["sessionmux.token"]);
  });

  it("a rotation that fails leaves no copy of the new secret beside the file", () => {
    const { dir, path } = folder();
    mkdirSync(path);
    expect(() => rotateToken(path)).toThrow(
      expect.objectContaining({ code: "token_file_unreadable", message: expect.stringContaining(path) }),
    );
    expect(readdirSync(dir.path)).toEqual(["sessionmux.token"]);
  });

  it("a rotation writes through no file left under its temporary name (a killed rotation, the same pid)", () => {
    const { dir, path } = folder();
    readOrCreateToken(path);
    // a container's process is pid 1 at every start: a name made of the pid alone comes back
    const elsewhere = dir.file("elsewhere");
    writeFileSync(elsewhere, "not a token file\n");
    symlinkSync(elsewhere, `${path}.${process.pid}.tmp`);
    const rotated = rotateToken(path);
    expect(readFileSync(elsewhere, "utf8")).toBe("not a token file\n");
    expect(readOrCreateToken(path)).toEqual({ token: rotated, created: false });
  });
});
