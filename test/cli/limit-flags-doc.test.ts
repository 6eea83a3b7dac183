import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { Command } from "commander";
import { describe, expect, it } from "vitest";
import { addLimitOptions, type LimitValues, mountedLimitsOf } from "../../src/cli/limit-options.js";
import { checkOptions } from "../../src/embed/option-checks.js";
import type { SessionmuxOptions } from "../../src/index.js";

/**
 * docs/reliability.md's table of the limit flags as options of a mounted host, read back row by
 * row: a flag missing from it, an option path it names wrongly, a default or a least value it
 * states that the code does not hold, fails here.
 */
const doc = readFileSync(resolve(import.meta.dirname, "../../docs/reliability.md"), "utf8");

interface Row {
  flag: string;
  paths: string[];
  fallback: number;
  /** The least value a mounted host takes, or `rate`: any number above 0. */
  min: number | "rate";
  max: number | undefined;
}

function tableRows(): Row[] {
  const start = doc.indexOf("| flag | option of `createSessionmux` | default | past it |");
  if (start < 0) throw new Error("no table of the limit flags as options in docs/reliability.md");
  const rows: Row[] = [];
  for (const line of doc.slice(start).split("\n").slice(2)) {
    if (!line.startsWith("|")) break;
    const [flagCell = "", optionCell = "", defaultCell = ""] = line.split("|").slice(1);
    const flag = /`(--[a-z-]+)`/.exec(flagCell)?.[1];
    if (!flag) throw new Error(`a row without a flag: ${line}`);
    // the option paths are the cell's code spans before any parenthesis
    const paths = [...(optionCell.split("(")[0] ?? "").matchAll(/`([A-Za-z.]+)`/g)].map((m) => m[1] ?? "");
    const fallback = Number(/^\s*(\d+)/.exec(defaultCell)?.[1]);
    const least = /at least (\d+)/.exec(defaultCell)?.[1];
    const range = /(\d+) to (\d+)/.exec(defaultCell);
    const min = /any number above 0/.test(defaultCell) ? "rate" : Number(range?.[1] ?? least ?? 1);
    rows.push({ flag, paths, fallback, min, max: range ? Number(range[2]) : undefined });
  }
  return rows;
}

function limitsFor(argv: string[]): Record<string, unknown> {
  const serve = addLimitOptions(
    new Command("serve").exitOverride().configureOutput({ writeErr: () => {}, writeOut: () => {} }),
  );
  serve.parse(argv, { from: "user" });
  return mountedLimitsOf(serve.opts<LimitValues>());
}

function at(values: Record<string, unknown>, path: string): unknown {
  return path.split(".").reduce<unknown>((value, name) => (value as Record<string, unknown>)[name], values);
}

/** The options object with `value` at `path` (`mux.maxQueuedCalls`, `uploadTtlMs`). */
function optionsWith(path: string, value: number): SessionmuxOptions {
  const [group, name] = path.split(".");
  const base = { db: "unused.db", tokens: [{ name: "alice", secret: "s3cret", admin: false }] };
  return (
    name === undefined ? { ...base, [path]: value } : { ...base, [group as string]: { [name]: value } }
  ) as SessionmuxOptions;
}

describe("docs/reliability.md's table of the limit flags as options", () => {
  const rows = tableRows();

  it("lists every limit flag of serve once", () => {
    const flags = addLimitOptions(new Command("serve"))
      .options.map((option) => option.long ?? "")
      .filter((flag) => flag !== "--metrics-token");
    expect(rows.map((row) => row.flag).sort()).toEqual([...flags].sort());
  });

  it.each(rows.map((row) => [row.flag, row] as const))(
    "%s sets the options it names, from the default it states",
    (flag, row) => {
      expect(row.paths.length).toBeGreaterThan(0);
      const given = row.min === "rate" ? 0.25 : row.fallback + 7;
      const set = limitsFor([flag, String(given)]);
      const unset = limitsFor([]);
      for (const path of row.paths) {
        expect(at(set, path), path).toBe(given);
        expect(at(unset, path), path).toBe(row.fallback);
      }
    },
  );

  it.each(rows.map((row) => [row.flag, row] as const))(
    "a mounted host takes %s's options in the range it states",
    (_flag, row) => {
      for (const path of row.paths) {
        if (row.min === "rate") {
          expect(() => checkOptions(optionsWith(path, 0.25))).not.toThrow();
          expect(() => checkOptions(optionsWith(path, 0))).toThrow(path);
          continue;
        }
        expect(() => checkOptions(optionsWith(path, row.min as number))).not.toThrow();
        expect(() => checkOptions(optionsWith(path, (row.min as number) - 1))).toThrow(path);
        if (row.max !== undefined)
          expect(() => checkOptions(optionsWith(path, (row.max as number) + 1))).toThrow(path);
      }
    },
  );
});
