import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { afterEach, describe, expect, it, vi } from "vitest";
import { readOrCreateToken } from "../../src/operations/token-file.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { tempDir } from "../support/temp-dir.js";

/**
 * The link that puts a first token in place, at the two moments a test cannot reach by itself:
 * another host starting on the same folder linking its token between this one's read and link
 * (the whole minting is synchronous), and a filesystem refusing hard links. Everything else is real.
 */

const link = vi.hoisted(() => ({
  /** runs just before the link: another host winning the race */
  before: undefined as (() => void) | undefined,
  failure: undefined as NodeJS.ErrnoException | undefined,
}));

vi.mock("node:fs", async (importOriginal) => {
  const fs = await importOriginal<typeof import("node:fs")>();
  return {
    ...fs,
    linkSync: (existing: string, path: string) => {
      link.before?.();
      if (link.failure) throw link.failure;
      fs.linkSync(existing, path);
    },
  };
});

const cleanups = cleanupsAfterEach();
afterEach(() => {
  link.before = undefined;
  link.failure = undefined;
});

function folder() {
  const dir = tempDir();
  cleanups.push(() => dir.remove());
  return { dir, path: dir.file("sessionmux.token") };
}

describe("the first token of a folder", () => {
  it("of a host that loses the race to another is the other's: one token for both, none overwritten", () => {
    const { dir, path } = folder();
    link.before = () => writeFileSync(path, "theirs\n", { mode: 0o600 });
    expect(readOrCreateToken(path)).toEqual({ token: "theirs", created: false });
    expect(readFileSync(path, "utf8")).toBe("theirs\n");
    expect(readdirSync(dir.path)).toEqual(["sessionmux.token"]);
  });

  it("is refused token_file_unreadable when the link fails for another reason, leaving nothing", () => {
    const { dir, path } = folder();
    link.failure = Object.assign(new Error("EPERM: operation not permitted, link"), { code: "EPERM" });
    expect(() => readOrCreateToken(path)).toThrow(
      expect.objectContaining({
        code: "token_file_unreadable",
        message: `token file ${path}: EPERM: operation not permitted, link`,
        cause: link.failure,
      }),
    );
    expect(readdirSync(dir.path)).toEqual([]);
  });
});
