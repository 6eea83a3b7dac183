import { randomBytes } from "node:crypto";
import pg from "pg";
import { afterEach } from "vitest";
import { PostgresSessionStore } from "../../../src/store/postgres/postgres-store.js";
import { dropSchema, pgUrl } from "../contract/backends.js";

/**
 * For a file's tests of the schema itself (plans, indexes): each call makes a schema of its own
 * as the store migrates it, and runs `use` with a connection whose search path is that schema;
 * the schema is dropped after the test.
 */
export function migratedSchema(prefix: string): <T>(use: (client: pg.Client) => Promise<T>) => Promise<T> {
  const made: string[] = [];
  afterEach(async () => {
    for (const schema of made.splice(0)) await dropSchema(pgUrl!, schema);
  });
  return async (use) => {
    const schema = `${prefix}_${randomBytes(6).toString("hex")}`;
    made.push(schema);
    const store = await PostgresSessionStore.open(pgUrl!, { schema, maxConnections: 1 });
    await store.close();
    const client = new pg.Client({ connectionString: pgUrl! });
    await client.connect();
    try {
      await client.query(`SET search_path = "${schema}"`);
      return await use(client);
    } finally {
      await client.end();
    }
  };
}
