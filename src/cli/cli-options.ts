import { InvalidArgumentError, Option } from "commander";

/** An integer option value of at least `min`, refused with the option's name otherwise. */
export const integer = (name: string, min: number) => (value: string) => {
  const n = Number(value);
  if (!Number.isInteger(n) || n < min) throw new InvalidArgumentError(`${name} must be an integer ≥ ${min}`);
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
  return new Option("--db <file>", "SQLite database file").env("SESSIONMUX_DB").default(DEFAULT_DB);
}
