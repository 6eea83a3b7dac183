import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** A fresh folder for one subject's files, removed when the subject closes. */
export function tempFolder(prefix: string): { path: string; file(name: string): string; remove(): void } {
  const path = mkdtempSync(join(tmpdir(), `sessionmux-bench-${prefix}-`));
  return {
    path,
    file: (name) => join(path, name),
    remove: () => rmSync(path, { recursive: true, force: true }),
  };
}
