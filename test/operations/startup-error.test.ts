import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { StartupError, StartupErrorCodes } from "../../src/operations/startup-error.js";

/**
 * A refusal to start: an Error named StartupError with a code from one list, its message, and the
 * error that caused it.
 */

/** Every `.ts` file under `folder`, recursively (the source tree is finite). */
function sourceFiles(folder: string): string[] {
  return readdirSync(folder, { withFileTypes: true }).flatMap((entry) => {
    const path = join(folder, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith(".ts") ? [path] : [];
  });
}

describe("StartupError", () => {
  it("is an Error named StartupError that carries its code, message and cause", () => {
    const cause = Object.assign(new Error("listen EADDRINUSE"), { code: "EADDRINUSE" });
    const err = new StartupError("address_in_use", "port 8080 is in use", { cause });
    expect(err).toBeInstanceOf(Error);
    expect(err.name).toBe("StartupError");
    expect(err.code).toBe("address_in_use");
    expect(err.message).toBe("port 8080 is in use");
    expect(err.cause).toBe(cause);
    expect(String(err)).toBe("StartupError: port 8080 is in use");
    expect(err.stack?.startsWith("StartupError: port 8080 is in use")).toBe(true);
  });

  it("has no cause unless given one", () => {
    const err = new StartupError("db_missing", "no database");
    expect("cause" in err).toBe(false);
    expect(err.code).toBe("db_missing");
  });

  it("lists each code once, and exactly the codes the host's refusals use", () => {
    expect(new Set(StartupErrorCodes).size).toBe(StartupErrorCodes.length);
    const used = new Set<string>();
    for (const file of sourceFiles(join(import.meta.dirname, "..", "..", "src"))) {
      for (const match of readFileSync(file, "utf8").matchAll(/new StartupError\(\s*"([a-z_]+)"/g)) {
        used.add(match[1] as string);
      }
    }
    expect([...used].sort()).toEqual([...StartupErrorCodes].sort());
  });
});
