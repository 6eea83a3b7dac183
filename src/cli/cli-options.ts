import { InvalidArgumentError, Option } from "commander";

/**
 * An integer option value from `min` (to `max`, if given), in decimal digits, refused with the
 * option's name otherwise. `Number` alone read an empty value (`SESSIONMUX_PORT=` from an unset
 * variable in a compose file) as 0, so the host listened on a random port, and took `0x1F` or
 * `1e3` too.
 */
export const integer =
  (name: string, min: number, max = Number.MAX_SAFE_INTEGER) =>
  (value: string) => {
    const n = /^\d+$/.test(value) ? Number(value) : Number.NaN;
    if (!Number.isSafeInteger(n) || n < min || n > max) {
      const range = max === Number.MAX_SAFE_INTEGER ? `≥ ${min}` : `from ${min} to ${max}`;
      throw new InvalidArgumentError(
        `${name} must be an integer ${range} in decimal digits, got ${JSON.stringify(value)}`,
      );
    }
    return n;
  };

/**
 * A rate option value above 0 in decimal digits, a fraction included (`0.5`: one every two
 * seconds), refused with the option's name otherwise, as `integer` refuses `1e3`, `0x10` and an
 * empty value.
 */
export const rate = (name: string) => (value: string) => {
  const n = /^\d+(\.\d+)?$/.test(value) ? Number(value) : Number.NaN;
  if (!Number.isFinite(n) || n <= 0) {
    throw new InvalidArgumentError(
      `${name} must be a number above 0 in decimal digits, got ${JSON.stringify(value)}`,
    );
  }
  return n;
};

/** A repeatable option; a comma-separated value (as an environment variable carries) counts as several. */
export const collectList = (value: string, previous: string[]) => [
  ...previous,
  ...value
    .split(",")
    .map((v) => v.trim())
    .filter((v) => v.length > 0),
];

export const DEFAULT_DB = "./data/sessions.db";

/** `--db`, also from `SESSIONMUX_DB`, for every command that works on the database. */
export function dbOption(): Option {
  return new Option("--db <file|url>", "SQLite database file, or a postgres://user@host:5432/db URL")
    .env("SESSIONMUX_DB")
    .default(DEFAULT_DB);
}

/** `--db-schema`: the PostgreSQL schema holding the tables (separate deployments, or tests, share a database). */
export function dbSchemaOption(): Option {
  return new Option("--db-schema <name>", "PostgreSQL schema holding the tables (default public)").env(
    "SESSIONMUX_DB_SCHEMA",
  );
}

export const DEFAULT_DATA_DIR = "./data";

/** `--data-dir`: where a host on PostgreSQL keeps its admin token (on SQLite it sits beside the file). */
export function dataDirOption(): Option {
  return new Option("--data-dir <folder>", "folder of the kept admin token when --db is a PostgreSQL URL")
    .env("SESSIONMUX_DATA_DIR")
    .default(DEFAULT_DATA_DIR);
}
