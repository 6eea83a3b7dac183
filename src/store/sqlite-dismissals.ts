import type Database from "better-sqlite3";
import type { DismissalOutcome } from "./dismissals.js";
import type { WriteOperation } from "./group-commit.js";

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
