import { isPostgresUrl } from "../store/open-store.js";
import { StartupError } from "./startup-error.js";

/** What `--db` names: a SQLite file, or a PostgreSQL database and the schema holding the tables. */
export type DatabaseTarget =
  | { kind: "sqlite"; path: string }
  | { kind: "postgres"; url: string; schema: string };

export const DEFAULT_PG_SCHEMA = "public";

/** As PostgreSQL folds an unquoted identifier: lower case, digits and `_`, at most 63 bytes. */
const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

/** How a refusal names the two settings: the CLI's flags, or `createSessionmux`'s options. */
export interface DatabaseOptionNames {
  db: string;
  schema: string;
}

const FLAG_NAMES: DatabaseOptionNames = { db: "--db", schema: "--db-schema" };

/** `--db` and `--db-schema` (the schema applies to PostgreSQL only; a SQLite file has none). */
export function databaseTarget(
  db: string,
  schema?: string,
  names: DatabaseOptionNames = FLAG_NAMES,
): DatabaseTarget {
  if (!isPostgresUrl(db)) {
    if (schema !== undefined && schema !== DEFAULT_PG_SCHEMA) {
      throw new StartupError(
        "db_option_invalid",
        `${names.schema} applies to a postgres:// database only (${names.db} ${db} is a SQLite file)`,
      );
    }
    return { kind: "sqlite", path: db };
  }
  let parsed: URL;
  try {
    parsed = new URL(db);
  } catch (err) {
    throw new StartupError(
      "db_option_invalid",
      `${names.db} is not a valid PostgreSQL URL: ${redactUrl(db)}`,
      {
        cause: err,
      },
    );
  }
  if (parsed.pathname.length <= 1) {
    throw new StartupError(
      "db_option_invalid",
      `${names.db} ${redactUrl(db)} names no database; add it, e.g. postgres://user@host:5432/sessionmux`,
    );
  }
  const name = schema ?? DEFAULT_PG_SCHEMA;
  if (!SCHEMA_NAME.test(name)) {
    throw new StartupError(
      "db_option_invalid",
      `${names.schema} ${JSON.stringify(name)} is not a schema name (lower case letters, digits and _, at most 63)`,
    );
  }
  return { kind: "postgres", url: db, schema: name };
}

/**
 * The URL with its password replaced, for logs and error messages: the one after the user name,
 * and a `password` query parameter, which the driver takes as well.
 */
export function redactUrl(url: string): string {
  return url
    .replace(/^(postgres(?:ql)?:\/\/[^:/@]*:)[^@]*@/i, "$1***@")
    .replace(/([?&]password=)[^&#]*/gi, "$1***");
}

/** How a log line names the database. */
export function describeTarget(target: DatabaseTarget): string {
  return target.kind === "sqlite" ? target.path : `${redactUrl(target.url)} (schema ${target.schema})`;
}
