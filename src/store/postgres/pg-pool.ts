import pg from "pg";
import { schemaIdentifier } from "./pg-schema.js";

export interface PgPoolOptions {
  /** Schema holding the store's tables. @default "public" */
  schema?: string;
  /** Connections in the pool (reads, the writer and the notifier). @default 10 */
  max?: number;
}

const INT8 = 20;

// seq, at and counts are bigint columns; every value the store keeps is a safe integer (epoch
// milliseconds, sequence numbers), so they come back as numbers rather than pg's default strings.
const types = {
  getTypeParser(oid: number, format?: string) {
    if (oid === INT8 && format !== "binary") return (value: string) => Number(value);
    return pg.types.getTypeParser(oid, format as "text");
  },
};

/**
 * A pool whose every connection runs in the store's schema with `synchronous_commit = on`, so a
 * COMMIT returns only after the WAL reached disk: an acknowledged write survives a crash.
 */
export function openPool(url: string, options: PgPoolOptions = {}): pg.Pool {
  const schema = schemaIdentifier(options.schema ?? "public");
  return new pg.Pool({
    connectionString: url,
    max: options.max ?? 10,
    types,
    options: `-c search_path=${schema} -c synchronous_commit=on`,
    application_name: "sessionmux",
  });
}

/** A single connection with the same settings, for LISTEN (it must stay out of the pool). */
export function openClient(url: string, options: PgPoolOptions = {}): pg.Client {
  const schema = schemaIdentifier(options.schema ?? "public");
  return new pg.Client({
    connectionString: url,
    types,
    options: `-c search_path=${schema} -c synchronous_commit=on`,
    application_name: "sessionmux-listen",
  });
}
