import Database from "better-sqlite3";
import { WAL_CHECKPOINT_PAGES } from "../../src/store/sqlite-store.js";
import { decode, encode } from "../harness/shared-codec.js";

/** One event row as the writers hand it over. */
export interface RawRow {
  sessionId: string;
  seq: number;
  event: { type: string; data: unknown };
}

/**
 * The physical limit of appends and replay: bare better-sqlite3 with the store's durability
 * settings (WAL, synchronous=FULL) and checkpoint interval, the same row shape, no projection,
 * no listeners.
 */
export class RawSqlite {
  private readonly db: Database.Database;
  private readonly insert: Database.Statement;
  private readonly page: Database.Statement;
  private readonly insertAll: Database.Transaction<(rows: readonly RawRow[], at: number) => void>;

  constructor(path: string) {
    this.db = new Database(path);
    this.db.pragma("journal_mode = WAL");
    this.db.pragma("synchronous = FULL");
    this.db.pragma(`wal_autocheckpoint = ${WAL_CHECKPOINT_PAGES}`);
    this.db.exec(
      "CREATE TABLE IF NOT EXISTS events (session_id TEXT NOT NULL, seq INTEGER NOT NULL, type TEXT NOT NULL, " +
        "at INTEGER NOT NULL, data BLOB NOT NULL, PRIMARY KEY (session_id, seq)) WITHOUT ROWID",
    );
    this.insert = this.db.prepare(
      "INSERT INTO events (session_id, seq, type, at, data) VALUES (?, ?, ?, ?, ?)",
    );
    this.page = this.db.prepare(
      "SELECT seq, type, at, data FROM events WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?",
    );
    // wrapped once, as a store keeps its prepared transaction: not rebuilt per batch
    this.insertAll = this.db.transaction((rows: readonly RawRow[], at: number) => {
      for (const row of rows)
        this.insert.run(row.sessionId, row.seq, row.event.type, at, encode(row.event.data));
    });
  }

  /** One transaction for the whole batch, the way a group commit of concurrent writers would. */
  insertBatch(rows: readonly RawRow[]): void {
    this.insertAll.immediate(rows, Date.now());
  }

  /** Reads and decodes one page of events after `afterSeq`. */
  readPage(sessionId: string, afterSeq: number, limit: number): { seq: number; data: unknown }[] {
    const rows = this.page.all(sessionId, afterSeq, limit) as {
      seq: number;
      type: string;
      at: number;
      data: Buffer;
    }[];
    return rows.map((row) => ({ seq: row.seq, type: row.type, at: row.at, data: decode(row.data) }));
  }

  close(): void {
    this.db.close();
  }
}
