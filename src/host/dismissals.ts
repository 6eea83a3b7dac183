import type { Logger } from "pino";
import type { HostStore } from "../store/live-state-store.js";
import type { LiveState } from "./live/live-state.js";
import type { NotificationHub } from "./notifications.js";
import type { Principal } from "./principal.js";
import { toRow } from "./session-row.js";
import { notFound } from "./store-outcomes.js";

/**
 * "Keep running" dismissal, seen from the host: a principal takes a session off their own list
 * and brings it back. Nothing else about the session changes. Every change is announced to that
 * principal alone (`session.dismissed` on each of their sockets); list caches hear of it as the
 * store's commit notice of the change (`meta`, marked `dismissal`), on every host sharing the store.
 *
 * What restores a dismissed session: `session.restore`, and the `resume` calls that ask the
 * session for work on the caller's behalf (`session.prompt`, `session.selectModel`, and
 * `session.respond` for the session whose interaction it answers), once they succeed: a call
 * that ends in an error leaves the dismissal as it was. Cold reads (`follow`, `page`,
 * the HTTP views) never do: a reconnecting follower would otherwise undo a dismissal made in
 * another tab. A client that opens a dismissed session for a person calls `session.restore`.
 */
export class Dismissals {
  constructor(
    private readonly store: HostStore,
    private readonly live: LiveState,
    private readonly hub: NotificationHub,
    private readonly now: () => number,
    private readonly logger: Logger,
  ) {}

  dismiss(principal: Principal, sessionId: string): Promise<void> {
    return this.#set(principal, sessionId, true);
  }

  restore(principal: Principal, sessionId: string): Promise<void> {
    return this.#set(principal, sessionId, false);
  }

  /**
   * A `resume` call succeeded on the session: restore it if the principal dismissed it. Started
   * once the call's work is done and not awaited by it, so a prompt's answer is not delayed by
   * this read; one indexed read when nothing was dismissed. A refused call never gets here.
   */
  restoreForWork(principal: Principal, sessionId: string): void {
    void (async () => {
      if (await this.store.isDismissed(sessionId, principal.name)) await this.restore(principal, sessionId);
    })().catch((err: unknown) =>
      this.logger.warn({ err, sessionId }, "restoring a dismissed session failed"),
    );
  }

  async #set(principal: Principal, sessionId: string, dismissed: boolean): Promise<void> {
    const outcome = dismissed
      ? await this.store.dismiss(sessionId, principal.name, this.now())
      : await this.store.restore(sessionId, principal.name);
    if (outcome.status === "not_found") throw notFound(sessionId);
    if (!outcome.changed) return;
    const projection = await this.store.projection(sessionId);
    if (!projection) return;
    this.hub.publishTo(principal, projection.owner, {
      name: "session.dismissed",
      value: { sessionId, dismissed, row: toRow(projection, this.live) },
    });
  }
}
