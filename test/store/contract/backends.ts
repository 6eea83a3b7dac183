import { randomBytes } from "node:crypto";
import pg from "pg";
import { afterEach, describe, inject } from "vitest";
import type { GroupCommitStats } from "../../../src/store/group-commit.js";
import type { HostStore } from "../../../src/store/live-state-store.js";
import { PostgresSessionStore } from "../../../src/store/postgres/postgres-store.js";
import { SqliteSessionStore } from "../../../src/store/sqlite-store.js";
import type { StoreMetrics } from "../../../src/store/store-metrics.js";
import { tempDir } from "../../support/temp-dir.js";

export type ContractStore = HostStore & { stats(): GroupCommitStats };

export interface OpenOptions {
  now?: () => number;
  metrics?: StoreMetrics;
}

/** One store on its own database (a temp SQLite file, or a PostgreSQL schema of its own). */
export interface StoreUnderTest {
  store: ContractStore;
  /** SQLite only: the database file, for checks of rows the contract does not expose. */
  path?: string;
  /** PostgreSQL only: the schema holding this database's tables. */
  schema?: string;
  /** Another store instance on the same database, as a second process would open it. */
  openAnother(options?: OpenOptions): Promise<ContractStore>;
  /** A reading instance beside `store` while it runs (SQLite: read-only, as one host holds the file). */
  openReader(): Promise<ContractStore>;
  /** Closes `store` and every other instance, then removes the database. */
  dispose(): Promise<void>;
}

export interface Backend {
  name: "sqlite" | "postgres";
  /**
   * Several store instances may write one database at once. Not SQLite: its writer keeps each
   * session's head in memory between transactions (one writing process per file).
   */
  sharedWriters: boolean;
  open(options?: OpenOptions): Promise<StoreUnderTest>;
}

const sqlite: Backend = {
  name: "sqlite",
  sharedWriters: false,
  async open(options = {}) {
    const dir = tempDir("sessionmux-contract-");
    const path = dir.file("sessions.db");
    const others: ContractStore[] = [];
    const store = SqliteSessionStore.open(path, options);
    return {
      store,
      path,
      async openAnother(more = {}) {
        const other = SqliteSessionStore.open(path, more);
        others.push(other);
        return other;
      },
      async openReader() {
        const reader = SqliteSessionStore.open(path, { readOnly: true });
        others.push(reader);
        return reader;
      },
      async dispose() {
        await Promise.all([store, ...others].map((s) => s.close()));
        dir.remove();
      },
    };
  },
};

/** A PostgreSQL backend: each opened store lives in a fresh random schema, dropped on dispose. */
function postgres(url: string): Backend {
  return {
    name: "postgres",
    sharedWriters: true,
    async open(options = {}) {
      const schema = `contract_${randomBytes(6).toString("hex")}`;
      const others: ContractStore[] = [];
      const store = await PostgresSessionStore.open(url, { schema, maxConnections: 4, ...options });
      return {
        store,
        schema,
        async openAnother(more = {}) {
          const other = await PostgresSessionStore.open(url, { schema, maxConnections: 4, ...more });
          others.push(other);
          return other;
        },
        async openReader() {
          const reader = await PostgresSessionStore.open(url, { schema, maxConnections: 4 });
          others.push(reader);
          return reader;
        },
        async dispose() {
          await Promise.all([store, ...others].map((s) => s.close()));
          await dropSchema(url, schema);
        },
      };
    },
  };
}

export async function dropSchema(url: string, schema: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  } finally {
    await client.end();
  }
}

/** The PostgreSQL URL of this run, or null when the global setup found none (and said so). */
export const pgUrl = inject("pgUrl");

export const backends: Backend[] = pgUrl ? [sqlite, postgres(pgUrl)] : [sqlite];

/** Runs `body` once per store implementation, titled with the backend's name. */
export function describeContract(title: string, body: (backend: Backend) => void): void {
  for (const backend of backends) describe(`${title} [${backend.name}]`, () => body(backend));
}

/** Opens stores for one test and disposes of them after it. */
export type Opener = (options?: OpenOptions) => Promise<StoreUnderTest>;

export function storeFixture(backend: Backend): Opener {
  const opened: StoreUnderTest[] = [];
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((s) => s.dispose()));
  });
  return async (options) => {
    const s = await backend.open(options);
    opened.push(s);
    return s;
  };
}
