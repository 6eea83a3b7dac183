import type { HostStore } from "./live-state-store.js";
import { PostgresSessionStore } from "./postgres/postgres-store.js";
import { SqliteSessionStore } from "./sqlite-store.js";
import type { StoreMetrics } from "./store-metrics.js";

export interface OpenStoreOptions {
  metrics?: StoreMetrics;
  /** PostgreSQL only: the schema holding the tables. @default "public" */
  schema?: string;
}

/** True for a `postgres://` or `postgresql://` URL; anything else is a SQLite file path. */
export function isPostgresUrl(db: string): boolean {
  return /^postgres(ql)?:\/\//i.test(db);
}

/** Opens (and migrates) the store `db` names: PostgreSQL for a URL, otherwise a SQLite file. */
export async function openStore(db: string, options: OpenStoreOptions = {}): Promise<HostStore> {
  if (isPostgresUrl(db)) {
    const storeOptions: { schema?: string; metrics?: StoreMetrics } = {};
    if (options.schema !== undefined) storeOptions.schema = options.schema;
    if (options.metrics !== undefined) storeOptions.metrics = options.metrics;
    return PostgresSessionStore.open(db, storeOptions);
  }
  return SqliteSessionStore.open(db, options.metrics ? { metrics: options.metrics } : {});
}
