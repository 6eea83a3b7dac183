import { readFileSync } from "node:fs";
import { builtinModules } from "node:module";
import { dirname, resolve } from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";

/** Walks the static import graph of a module, returning every bare (package) specifier it reaches. */
function packagesReachedFrom(entry: string): { packages: Set<string>; files: Set<string> } {
  const packages = new Set<string>();
  const files = new Set<string>();
  const queue = [entry];
  while (queue.length > 0) {
    const file = queue.pop()!;
    if (files.has(file)) continue;
    files.add(file);
    const info = ts.preProcessFile(readFileSync(file, "utf8"), true, true);
    for (const { fileName } of info.importedFiles) {
      if (fileName.startsWith(".")) queue.push(resolve(dirname(file), fileName.replace(/\.js$/, ".ts")));
      else packages.add(fileName);
    }
  }
  return { packages, files };
}

describe("browser bundle", () => {
  it("src/client/index.ts reaches no Node module and not ws", () => {
    const { packages, files } = packagesReachedFrom(resolve("src/client/index.ts"));
    const node = new Set(builtinModules);
    const offending = [...packages].filter((p) => p.startsWith("node:") || node.has(p) || p === "ws");
    expect(offending).toEqual([]);
    expect([...packages].sort()).toEqual(expect.arrayContaining(["@msgpack/msgpack", "rxjs"]));
    expect([...files].some((f) => f.endsWith("node.ts"))).toBe(false);
  });

  it("the Node entry is the one place ws comes in", () => {
    const { packages } = packagesReachedFrom(resolve("src/client/node.ts"));
    expect(packages.has("ws")).toBe(true);
  });
});
