import { mkdirSync, rmSync } from "node:fs";
import { basename, join } from "node:path";
import { fileURLToPath } from "node:url";
import { buildSync } from "esbuild";

// Inside the project's node_modules, so the packages the children import resolve from there.
const FOLDER = fileURLToPath(
  new URL(`../../node_modules/.cache/sessionmux-bench/${process.pid}`, import.meta.url),
);
const compiled = new Map<string, string>();

/**
 * A child process's TypeScript entry as one plain JavaScript file, compiled once per run. A child
 * started with tsx spends about 0.7 s more CPU at each start running its modules through the
 * loader, on the core the followers have (a full run starts some thirty children); the code it
 * then runs is the same. Packages stay imports; the files go when this process exits.
 */
export function compiledChild(entry: string): string {
  const known = compiled.get(entry);
  if (known) return known;
  if (compiled.size === 0) {
    mkdirSync(FOLDER, { recursive: true });
    process.once("exit", () => rmSync(FOLDER, { recursive: true, force: true }));
  }
  const outfile = join(FOLDER, `${basename(entry, ".ts")}.mjs`);
  buildSync({
    entryPoints: [entry],
    outfile,
    bundle: true,
    packages: "external",
    platform: "node",
    format: "esm",
    target: "node20",
    logLevel: "warning",
  });
  compiled.set(entry, outfile);
  return outfile;
}
