import Database from "better-sqlite3";
import pg from "pg";
import { pgUrl, type StoreUnderTest } from "./backends.js";

/** Runs SQL on a PostgreSQL schema from a connection of its own, as an operator's hand would. */
export async function tamperSchema(schema: string, sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: pgUrl! });
  await client.connect();
  try {
    await client.query(`SET search_path TO "${schema}"`);
    await client.query(sql);
  } finally {
    await client.end();
  }
}

/** Runs SQL on the store's database beside the store (its SQLite file or its schema). */
export async function tamper(db: StoreUnderTest, sql: string): Promise<void> {
  if (db.path) {
    const raw = new Database(db.path);
    raw.exec(sql);
    raw.close();
    return;
  }
  await tamperSchema(db.schema!, sql);
}
