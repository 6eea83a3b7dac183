import type Database from "better-sqlite3";
import { type DismissalFilter, dismissalCondition } from "./dismissals.js";
import { decodeListCursor, encodeListCursor } from "./list-cursor.js";
import { publicProjection } from "./projection.js";
import { headSeqOf } from "./read-head.js";
import { type ProjectionRow, projectionFromRow } from "./session-state.js";
import type { ListQuery, SessionProjection } from "./session-store.js";

/**
 * `list`: newest `updatedAt` first, ties by ascending session id, keyset-paged so a page costs the
 * same at any depth. One prepared statement per combination of filters, built on first use.
 */
export class ListQueries {
  private readonly statements = new Map<string, Database.Statement>();

  constructor(private readonly db: Database.Database) {}

  run(query: ListQuery): { rows: SessionProjection[]; next?: string } {
    const after = query.before === undefined ? undefined : decodeListCursor(query.before);
    const params: unknown[] = [];
    if (query.owner !== undefined) params.push(query.owner);
    if (query.dismissals) params.push(query.dismissals.principal);
    if (after) params.push(after.updatedAt, after.updatedAt, after.sessionId);
    params.push(query.limit + 1);
    const statement = this.statement(
      query.owner !== undefined,
      query.parked === true,
      after !== undefined,
      query.dismissals,
    );
    const found = statement.all(...params) as (ProjectionRow & { head_seq: number })[];
    const rows = found
      .slice(0, query.limit)
      .map((row) => publicProjection(projectionFromRow(row, row.head_seq)));
    const last = rows[rows.length - 1];
    if (found.length > query.limit && last) {
      return { rows, next: encodeListCursor({ updatedAt: last.updatedAt, sessionId: last.sessionId }) };
    }
    return { rows };
  }

  private statement(
    byOwner: boolean,
    parked: boolean,
    paged: boolean,
    dismissals: DismissalFilter | undefined,
  ): Database.Statement {
    const key = `${byOwner}:${parked}:${paged}:${dismissals?.dismissed ?? "-"}`;
    let statement = this.statements.get(key);
    if (!statement) {
      const where: string[] = [];
      if (byOwner) where.push("owner = ?");
      if (dismissals) where.push(dismissalCondition(dismissals, "?"));
      if (parked) where.push("last_state = 'input-required'");
      // the leading `updated_at <= ?` is what lets SQLite seek the index instead of scanning it
      if (paged) where.push("updated_at <= ? AND (updated_at < ? OR session_id > ?)");
      const sql = `SELECT projections.*, ${headSeqOf("projections.log_key")} AS head_seq
        FROM projections ${where.length ? `WHERE ${where.join(" AND ")}` : ""}
        ORDER BY updated_at DESC, session_id LIMIT ?`;
      statement = this.db.prepare(sql);
      this.statements.set(key, statement);
    }
    return statement;
  }
}
