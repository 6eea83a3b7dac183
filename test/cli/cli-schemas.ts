import { randomBytes } from "node:crypto";
import pg from "pg";

/**
 * The PostgreSQL schemas a test file's commands run on: `create()` names a fresh one
 * (`<prefix>_<hex>`), `drop()` drops every one named since, once nothing uses them any more.
 */
export function testSchemas(
  pgUrl: string | null | undefined,
  prefix: string,
): { create(): string; drop(): Promise<void> } {
  const schemas: string[] = [];
  return {
    create() {
      const schema = `${prefix}_${randomBytes(5).toString("hex")}`;
      schemas.push(schema);
      return schema;
    },
    async drop() {
      if (!pgUrl || schemas.length === 0) return;
      const client = new pg.Client({ connectionString: pgUrl });
      await client.connect();
      for (const schema of schemas.splice(0)) await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await client.end();
    },
  };
}
