import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** A fresh folder under the OS temp dir; `remove()` deletes it. */
export function tempDir(prefix = "sessionmux-"): {
  path: string;
  file(name: string): string;
  remove(): void;
} {
  const path = mkdtempSync(join(tmpdir(), prefix));
  return {
    path,
    file: (name) => join(path, name),
    remove: () => rmSync(path, { recursive: true, force: true }),
  };
}
