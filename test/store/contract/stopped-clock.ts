import pg from "pg";
import { type Backend, type ContractStore, type Opener, pgUrl } from "./backends.js";

/** A store whose lease clock stands still until the test moves it. */
export interface StoppedClock {
  store: ContractStore;
  /** A second instance on the same database (a second host) where the backend allows, else `store`. */
  other: ContractStore;
  /** Moves the store's clock to `ms` (epoch milliseconds) for every instance. */
  set(ms: number): Promise<void>;
}

/**
 * Opens a store whose clock reads `start` until `set` moves it. SQLite judges leases by its `now`
 * option; PostgreSQL by the database's `sessionmux_now()`, which is replaced in the store's own
 * schema by one that reads the time from a table, so every statement of every instance (the
 * kept-state checks at COMMIT included) sees the time the test set.
 */
export async function openStoppedClock(backend: Backend, open: Opener, start: number): Promise<StoppedClock> {
  let clock = start;
  const now = () => clock;
  const under = await open({ now });
  const other = backend.sharedWriters ? await under.openAnother({ now }) : under.store;
  if (backend.name === "sqlite")
    return {
      store: under.store,
      other,
      async set(ms) {
        clock = ms;
      },
    };
  const schema = `"${under.schema!}"`;
  const admin = new pg.Client({ connectionString: pgUrl! });
  await admin.connect();
  try {
    await admin.query(`CREATE TABLE ${schema}.stopped_clock (ms bigint NOT NULL);
      INSERT INTO ${schema}.stopped_clock VALUES (${start});
      CREATE OR REPLACE FUNCTION ${schema}.sessionmux_now() RETURNS bigint LANGUAGE sql STABLE
        AS $$ SELECT ms FROM ${schema}.stopped_clock $$`);
  } finally {
    await admin.end();
  }
  return {
    store: under.store,
    other,
    async set(ms) {
      clock = ms;
      const client = new pg.Client({ connectionString: pgUrl! });
      await client.connect();
      try {
        await client.query(`UPDATE ${schema}.stopped_clock SET ms = $1`, [ms]);
      } finally {
        await client.end();
      }
    },
  };
}
