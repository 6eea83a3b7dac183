import type Database from "better-sqlite3";
import type { Statements } from "./sqlite-statements.js";

/** Columns of one event row, in the insert's order. */
const COLUMNS = 5;

/**
 * The event rows of one append, inserted a few at a time: a statement of 16, 8, 4, 2 or 1 rows
 * per step, so an append of n events crosses into SQLite about log2(n) times rather than n times
 * (each crossing and statement reset costs about what a row's insert does). Rows wait here only
 * until `flush`, which the writer calls before anything that reads the log in the transaction.
 */
export class EventRows {
  private readonly params: unknown[] = [];
  private readonly bySize: readonly (readonly [number, Database.Statement])[];

  constructor(statements: Statements) {
    this.bySize = [
      [16, statements.insertEvents16],
      [8, statements.insertEvents8],
      [4, statements.insertEvents4],
      [2, statements.insertEvents2],
      [1, statements.insertEvent],
    ];
  }

  add(sessionId: string, seq: number, type: string, at: number, data: Uint8Array): void {
    this.params.push(sessionId, seq, type, at, data);
  }

  /** Drops the rows added since the last flush. */
  discard(): void {
    this.params.length = 0;
  }

  /** Inserts every row added since the last flush, in the order added. */
  flush(): void {
    const params = this.params;
    let start = 0;
    try {
      while (start < params.length) {
        const left = (params.length - start) / COLUMNS;
        const [rows, statement] = this.bySize.find(([size]) => size <= left)!;
        const end = start + rows * COLUMNS;
        // as arguments, not one array: better-sqlite3 reads an array's elements through V8's
        // generic property lookup, one call per value, several times the cost of the spread
        statement.run(...params.slice(start, end));
        start = end;
      }
    } finally {
      // a failed insert fails the transaction: nothing of it may be inserted by a later flush
      params.length = 0;
    }
  }
}
