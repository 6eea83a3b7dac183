import { Command, InvalidArgumentError, Option } from "commander";
import { afterEach, describe, expect, it, vi } from "vitest";
import {
  collectList,
  DEFAULT_DATA_DIR,
  DEFAULT_DB,
  dataDirOption,
  dbOption,
  dbSchemaOption,
  integer,
} from "../../src/cli/cli-options.js";

afterEach(() => {
  vi.unstubAllEnvs();
});

/** The refusal `integer` makes of `value`, or a failure when it takes it. */
function refusal(parse: (value: string) => number, value: string): InvalidArgumentError {
  try {
    parse(value);
  } catch (err) {
    expect(err).toBeInstanceOf(InvalidArgumentError);
    return err as InvalidArgumentError;
  }
  throw new Error(`took ${JSON.stringify(value)}`);
}

/** The value a command with only `option` parses from these arguments and variables. */
function parsedValue(option: Option, argv: string[], env: Record<string, string> = {}): unknown {
  for (const [name, value] of Object.entries(env)) vi.stubEnv(name, value);
  const command = new Command("c")
    .exitOverride()
    .configureOutput({ writeErr: () => {}, writeOut: () => {} })
    .addOption(option);
  command.parse(argv, { from: "user" });
  return command.opts()[option.attributeName()];
}

describe("integer option values", () => {
  it("take an integer from the least to the greatest, as a number, and refuse one outside, naming the range", () => {
    const port = integer("--port", 0, 65_535);
    expect(port("0")).toBe(0);
    expect(port("65535")).toBe(65_535);
    expect(port("8787")).toBe(8787);
    expect(port("008787")).toBe(8787);
    expect(refusal(port, "65536").message).toBe(
      `--port must be an integer from 0 to 65535 in decimal digits, got "65536"`,
    );
    const pool = integer("--db-pool-size", 2, 40);
    expect(pool("2")).toBe(2);
    expect(pool("40")).toBe(40);
    expect(refusal(pool, "1").message).toBe(
      `--db-pool-size must be an integer from 2 to 40 in decimal digits, got "1"`,
    );
    expect(refusal(pool, "41").message).toBe(
      `--db-pool-size must be an integer from 2 to 40 in decimal digits, got "41"`,
    );
  });

  it("without a greatest, take any safe integer from the least and name only the least", () => {
    const limit = integer("--max-queued-calls", 3);
    expect(limit("3")).toBe(3);
    expect(limit(String(Number.MAX_SAFE_INTEGER))).toBe(Number.MAX_SAFE_INTEGER);
    expect(refusal(limit, "2").message).toBe(
      `--max-queued-calls must be an integer ≥ 3 in decimal digits, got "2"`,
    );
    // one past the safe integers reads back as another number: refused, not rounded
    expect(refusal(limit, "9007199254740993").message).toBe(
      `--max-queued-calls must be an integer ≥ 3 in decimal digits, got "9007199254740993"`,
    );
    expect(refusal(integer("--n", 0), "99999999999999999999").message).toContain("≥ 0");
  });

  it("refuse whatever is not decimal digits alone, an empty value first (an unset variable in a compose file)", () => {
    const port = integer("--port", 0, 65_535);
    for (const bad of [
      "",
      " ",
      " 80",
      "80 ",
      "8 0",
      "-0",
      "+80",
      "80.0",
      "8e1",
      "0x50",
      "0b1",
      "x80",
      "80x",
      "Infinity",
      "NaN",
    ]) {
      expect(refusal(port, bad).message).toBe(
        `--port must be an integer from 0 to 65535 in decimal digits, got ${JSON.stringify(bad)}`,
      );
    }
    const limit = integer("--upload-ttl-ms", 0);
    for (const bad of ["", "1\n", "\n1", "1.5", "-1"]) {
      expect(refusal(limit, bad).message).toBe(
        `--upload-ttl-ms must be an integer ≥ 0 in decimal digits, got ${JSON.stringify(bad)}`,
      );
    }
  });
});

describe("list option values", () => {
  it("add each comma-separated entry, trimmed, after the earlier ones, and drop empty entries", () => {
    expect(collectList("a", [])).toEqual(["a"]);
    expect(collectList(" b , c,,d ,", ["a"])).toEqual(["a", "b", "c", "d"]);
    expect(collectList(" , ,", ["a"])).toEqual(["a"]);
    expect(collectList("", [])).toEqual([]);
  });

  it("collect a repeated flag and a comma-separated variable alike", () => {
    const origin = () =>
      new Option("--allowed-origin <origin>", "extra allowed Origin")
        .env("SESSIONMUX_ALLOWED_ORIGINS")
        .argParser(collectList)
        .default([]);
    expect(
      parsedValue(origin(), ["--allowed-origin", "https://a", "--allowed-origin", "https://b,https://c"]),
    ).toEqual(["https://a", "https://b", "https://c"]);
    expect(parsedValue(origin(), [], { SESSIONMUX_ALLOWED_ORIGINS: "https://a, https://b" })).toEqual([
      "https://a",
      "https://b",
    ]);
  });
});

describe("database options", () => {
  it("--db: a SQLite file or a URL, from SESSIONMUX_DB, ./data/sessions.db by default, the flag winning", () => {
    expect(DEFAULT_DB).toBe("./data/sessions.db");
    expect(dbOption().long).toBe("--db");
    expect(dbOption().description).not.toBe("");
    expect(parsedValue(dbOption(), [])).toBe("./data/sessions.db");
    expect(parsedValue(dbOption(), [], { SESSIONMUX_DB: "postgres://u@h:5432/d" })).toBe(
      "postgres://u@h:5432/d",
    );
    expect(parsedValue(dbOption(), ["--db", "/x/flag.db"], { SESSIONMUX_DB: "/x/env.db" })).toBe(
      "/x/flag.db",
    );
  });

  it("--db-schema: from SESSIONMUX_DB_SCHEMA, none by default (the store takes public), the flag winning", () => {
    expect(dbSchemaOption().long).toBe("--db-schema");
    expect(dbSchemaOption().description).not.toBe("");
    expect(parsedValue(dbSchemaOption(), [])).toBeUndefined();
    expect(parsedValue(dbSchemaOption(), [], { SESSIONMUX_DB_SCHEMA: "tenant_a" })).toBe("tenant_a");
    expect(parsedValue(dbSchemaOption(), ["--db-schema", "flag"], { SESSIONMUX_DB_SCHEMA: "env" })).toBe(
      "flag",
    );
  });

  it("--data-dir: from SESSIONMUX_DATA_DIR, ./data by default, the flag winning", () => {
    expect(DEFAULT_DATA_DIR).toBe("./data");
    expect(dataDirOption().long).toBe("--data-dir");
    expect(dataDirOption().description).not.toBe("");
    expect(parsedValue(dataDirOption(), [])).toBe("./data");
    expect(parsedValue(dataDirOption(), [], { SESSIONMUX_DATA_DIR: "/var/lib/sm" })).toBe("/var/lib/sm");
    expect(parsedValue(dataDirOption(), ["--data-dir", "/flag"], { SESSIONMUX_DATA_DIR: "/env" })).toBe(
      "/flag",
    );
  });

  it("each take a value: a flag given bare is refused", () => {
    for (const option of [dbOption(), dbSchemaOption(), dataDirOption()]) {
      expect(() => parsedValue(option, [option.long ?? ""])).toThrow(/argument missing/);
    }
  });
});
