import type Database from "better-sqlite3";
import type { DismissalOutcome } from "./dismissals.js";
import type { WriteOperation } from "./group-commit.js";

/**
 * The SQLite side: statements on the store's connection, writes run inside its group commit. A
 * change is announced in its transaction as a `meta` commit notice marked `dismissal` (as the
 * PostgreSQL side does): a host's list caches drop their answers on it.
 */
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
    // a deleted session's dismissals wait for the purger (its id is never created again)
    this.find = db.prepare(
      `SELECT 1 FROM dismissals d WHERE d.principal = ? AND d.session_id = ?
         AND EXISTS (SELECT 1 FROM projections p WHERE p.session_id = d.session_id)`,
    );
  }

  dismiss(sessionId: string, principal: string, at: number): WriteOperation<DismissalOutcome> {
    return this.onLiveSession(sessionId, () => this.insert.run(principal, sessionId, at));
  }

  restore(sessionId: string, principal: string): WriteOperation<DismissalOutcome> {
    return this.onLiveSession(sessionId, () => this.remove.run(principal, sessionId));
  }

  private onLiveSession(
    sessionId: string,
    write: () => Database.RunResult,
  ): WriteOperation<DismissalOutcome> {
    return (batch) => {
      if (this.live.get(sessionId) === undefined) return { status: "not_found" };
      const changed = write().changes > 0;
      if (changed) batch.notify(sessionId, { kind: "meta", dismissal: true }, null);
      return { status: "ok", changed };
    };
  }

  isDismissed(sessionId: string, principal: string): boolean {
    return this.find.get(principal, sessionId) !== undefined;
  }
}
