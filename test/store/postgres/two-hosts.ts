import { randomBytes } from "node:crypto";
import { PostgresSessionStore } from "../../../src/store/postgres/postgres-store.js";
import { dropSchema, pgUrl } from "../contract/backends.js";

/** Two stores (hosts) on one fresh schema, and how to close both and drop the schema. */
export async function openTwoHosts(
  prefix: string,
): Promise<{ a: PostgresSessionStore; b: PostgresSessionStore; schema: string; dispose(): Promise<void> }> {
  const schema = `${prefix}_${randomBytes(6).toString("hex")}`;
  const a = await PostgresSessionStore.open(pgUrl!, { schema, maxConnections: 2 });
  const b = await PostgresSessionStore.open(pgUrl!, { schema, maxConnections: 2 });
  return {
    a,
    b,
    schema,
    async dispose() {
      await Promise.all([a.close(), b.close()]);
      await dropSchema(pgUrl!, schema);
    },
  };
}
