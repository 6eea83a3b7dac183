import { createHash } from "node:crypto";
import Database from "better-sqlite3";

/** Per table of the database (FTS shadow tables included): its row count and a digest of every row. */
export type DurableSnapshot = Record<string, { rows: number; digest: string }>;

/**
 * A read-only view of a host's SQLite file for "nothing durable changed" checks: the whole
 * content, every table, compared before and after an input that must change nothing.
 */
export class DurableContent {
  readonly #db: Database.Database;

  constructor(path: string) {
    this.#db = new Database(path, { readonly: true, fileMustExist: true });
  }

  snapshot(): DurableSnapshot {
    const tables = this.#db
      .prepare(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name",
      )
      .pluck()
      .all() as string[];
    const snapshot: DurableSnapshot = {};
    const read = this.#db.transaction(() => {
      for (const table of tables) {
        const hash = createHash("sha256");
        let rows = 0;
        for (const row of this.#db.prepare(`SELECT * FROM "${table}"`).raw().iterate() as Iterable<
          unknown[]
        >) {
          rows++;
          for (const value of row)
            hash.update(Buffer.isBuffer(value) ? value : `${typeof value}:${String(value)}`).update("\0");
          hash.update("\n");
        }
        snapshot[table] = { rows, digest: hash.digest("hex").slice(0, 16) };
      }
    });
    read();
    return snapshot;
  }

  close(): void {
    this.#db.close();
  }
}
