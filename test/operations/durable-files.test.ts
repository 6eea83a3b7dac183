import { readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { syncFolder, writeNewFileSynced } from "../../src/operations/durable-files.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { tempDir } from "../support/temp-dir.js";

/**
 * The two steps a file goes through before it is linked or renamed into place: written whole and
 * synced, then its folder synced. Neither leaves a descriptor open.
 */

const cleanups = cleanupsAfterEach();

function folder(): ReturnType<typeof tempDir> {
  const dir = tempDir("sessionmux-durable-");
  cleanups.push(() => dir.remove());
  return dir;
}

/** How many descriptors this process holds open (Linux). */
function openDescriptors(): number {
  return readdirSync("/proc/self/fd").length;
}

describe("writeNewFileSynced", () => {
  it("creates the file with its text and mode, and closes it", () => {
    const dir = folder();
    const before = openDescriptors();
    for (let i = 0; i < 8; i++) writeNewFileSynced(dir.file(`token-${i}`), `text ${i}\n`, 0o600);
    expect(openDescriptors()).toBe(before);
    expect(readFileSync(dir.file("token-3"), "utf8")).toBe("text 3\n");
    expect(statSync(dir.file("token-3")).mode & 0o777).toBe(0o600);
  });

  it("refuses a file that exists, and leaves it as it was", () => {
    const dir = folder();
    writeFileSync(dir.file("taken"), "first");
    expect(() => writeNewFileSynced(dir.file("taken"), "second", 0o600)).toThrow(
      expect.objectContaining({ code: "EEXIST" }),
    );
    expect(readFileSync(dir.file("taken"), "utf8")).toBe("first");
  });
});

describe("syncFolder", () => {
  it("syncs a folder and closes it", () => {
    const dir = folder();
    const before = openDescriptors();
    for (let i = 0; i < 8; i++) syncFolder(dir.path);
    expect(openDescriptors()).toBe(before);
  });

  it("fails on a folder that is not there, rather than passing as synced", () => {
    const dir = folder();
    expect(() => syncFolder(dir.file("gone"))).toThrow(expect.objectContaining({ code: "ENOENT" }));
  });
});
