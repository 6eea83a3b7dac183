import type Database from "better-sqlite3";
import type { WriteOperation } from "./group-commit.js";

/**
 * "Keep running" dismissal: a principal takes a session off their own list. Nothing about the
 * session changes (its log, its agent, its queue); only whose list shows it. Rows are keyed by
 * the principal's name, the name the store records as a session's owner, so a dismissal survives
 * restarts and follows the principal across sockets and hosts.
 */
export interface DismissalStore {
  /** Records the dismissal; `changed` is false when it was already recorded. */
  dismiss(sessionId: string, principal: string, at: number): Promise<DismissalOutcome>;
  /** Removes the dismissal; `changed` is false when there was none. */
  restore(sessionId: string, principal: string): Promise<DismissalOutcome>;
  isDismissed(sessionId: string, principal: string): Promise<boolean>;
}

/** `not_found`: no live session by that id (never created, or deleted). */
export type DismissalOutcome = { status: "ok"; changed: boolean } | { status: "not_found" };

/**
 * `list` sees sessions through one principal's dismissals: without `dismissed` (or `false`) it
 * leaves out what `principal` dismissed, with `true` it shows only that.
 */
export interface DismissalFilter {
  principal: string;
  dismissed: boolean;
}

/** The SQL condition a list query adds for `filter`; `?` takes the principal's name. */
export function dismissalCondition(filter: DismissalFilter, placeholder: string): string {
  const exists = `EXISTS (SELECT 1 FROM dismissals d WHERE d.principal = ${placeholder} AND d.session_id = projections.session_id)`;
  return filter.dismissed ? exists : `NOT ${exists}`;
}

/** The SQLite side: statements on the store's connection, writes run inside its group commit. */
export class SqliteDismissals {
  private readonly live: Database.Statement;
  private readonly insert: Database.Statement;
  private readonly remove: Database.Statement;
  private readonly find: Database.Statement;

  constructor(db: Database.Database) {
    this.live = db.prepare("SELECT 1 FROM projections WHERE session_id = ?");
    this.insert = db.prepare(
      "INSERT OR IGNORE INTO dismissals (principal, session_id, dismissed_at) VALUES (?, ?, ?)",
    );
    this.remove = db.prepare("DELETE FROM dismissals WHERE principal = ? AND session_id = ?");
    this.find = db.prepare("SELECT 1 FROM dismissals WHERE principal = ? AND session_id = ?");
  }

  dismiss(sessionId: string, principal: string, at: number): WriteOperation<DismissalOutcome> {
    return () => {
      if (this.live.get(sessionId) === undefined) return { status: "not_found" };
      return { status: "ok", changed: this.insert.run(principal, sessionId, at).changes > 0 };
    };
  }

  restore(sessionId: string, principal: string): WriteOperation<DismissalOutcome> {
    return () => {
      if (this.live.get(sessionId) === undefined) return { status: "not_found" };
      return { status: "ok", changed: this.remove.run(principal, sessionId).changes > 0 };
    };
  }

  isDismissed(sessionId: string, principal: string): boolean {
    return this.find.get(principal, sessionId) !== undefined;
  }
}
