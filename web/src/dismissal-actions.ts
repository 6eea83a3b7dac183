import type { ConsoleLink } from "./console-link.js";
import type { SessionListModel } from "./session-list-model.js";
import type { ListView } from "./session-list-view.js";

/** What the dismissal actions need of the console. */
export interface DismissalContext {
  readonly link: ConsoleLink;
  list(): SessionListModel;
  online(): boolean;
  run(what: string, work: () => Promise<unknown>): void;
  /** Shows a view of the list, and opens `sessionId` when given. */
  show(view: ListView, sessionId?: string): void;
}

/**
 * "Keep running" dismissal in the console: a row's × takes the session off this principal's list
 * (its agent keeps running, an open transcript stays open), the "Dismissed" view lists them with
 * ↩ to put one back, and opening a dismissed session from that view or a search hit restores it
 * first, then shows it. Moves are made locally at once; one the host refuses brings a fresh list.
 */
export class DismissalActions {
  constructor(private readonly ctx: DismissalContext) {}

  /** Handles a click on a row or hit; false when it is a plain open of a session on the list. */
  open(sessionId: string, action: string | undefined): boolean {
    if (action === "dismiss") {
      this.dismiss(sessionId);
      return true;
    }
    if (action === "restore" || this.ctx.list().dismissed.has(sessionId)) {
      this.restore(sessionId, action !== "restore");
      return true;
    }
    return false;
  }

  private dismiss(sessionId: string): void {
    const list = this.ctx.list();
    const row = list.row(sessionId);
    if (!row || !this.ctx.online()) return;
    list.setDismissed(row, true);
    this.ctx.run("Dismiss", () => this.refreshOnFailure(this.ctx.link.dismiss(sessionId)));
  }

  private restore(sessionId: string, open: boolean): void {
    if (!this.ctx.online()) return;
    const list = this.ctx.list();
    const row = list.row(sessionId);
    if (row) list.setDismissed(row, false);
    this.ctx.run("Restore", async () => {
      await this.refreshOnFailure(this.ctx.link.restore(sessionId));
      if (open) this.ctx.show("list", sessionId);
    });
  }

  private async refreshOnFailure(call: Promise<unknown>): Promise<unknown> {
    try {
      return await call;
    } catch (error) {
      void this.ctx
        .list()
        .refresh()
        .catch(() => undefined);
      throw error;
    }
  }
}
