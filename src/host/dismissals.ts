import type { Logger } from "pino";
import { SessionmuxError } from "../../protocol/index.js";
import type { DismissalChange } from "../store/dismissals.js";
import type { HostStore } from "../store/live-state-store.js";
import type { LiveState } from "./live/live-state.js";
import type { NotificationHub } from "./notifications.js";
import type { Principal } from "./principal.js";
import { toRow } from "./session-row.js";
import { notFound } from "./store-outcomes.js";

/**
 * "Keep running" dismissal, seen from the host: a principal takes a session off their own list
 * and brings it back. Nothing else about the session changes. Every change is announced to that
 * principal alone (`session.dismissed` on each of their sockets), on every host sharing the store:
 * this host tells its own sockets of a change it made, and of one another host made as its store
 * tells it (`subscribeDismissals`: the principal and the new state, which no commit listener is
 * given). List caches hear of it as the store's commit notice of the change (`meta`, marked
 * `dismissal`), on every host sharing the store.
 *
 * What restores a dismissed session: `session.restore`, and the `resume` calls that ask the
 * session for work on the caller's behalf (`session.prompt`, `session.selectModel`, and
 * `session.respond` for the session whose interaction it answers), once they succeed and before
 * they answer: a call that ends in an error leaves the dismissal as it was. Cold reads (`follow`, `page`,
 * the HTTP views) never do: a reconnecting follower would otherwise undo a dismissal made in
 * another tab. A client that opens a dismissed session for a person calls `session.restore`.
 */
export class Dismissals {
  #stopHearing: (() => void) | undefined;
  /** Other hosts' changes, told in the order heard (each reads its row first). */
  #told: Promise<void> = Promise.resolve();

  constructor(
    private readonly store: HostStore,
    private readonly live: LiveState,
    private readonly hub: NotificationHub,
    private readonly now: () => number,
    private readonly logger: Logger,
  ) {}

  /** Hears the changes other hosts sharing the store make (none on a store of one host). */
  start(): void {
    if (this.#stopHearing || !this.store.subscribeDismissals) return;
    const stopHearing = this.store.subscribeDismissals(
      (change) => this.#heard(change),
      () => this.hub.names(),
    );
    // what a principal with sockets here has dismissed, so a restore the store could not hear of
    // (its feed of other hosts was down) is found afterwards
    const remember = (name: string) =>
      this.store
        .rememberDismissals?.(name)
        .catch((err: unknown) => this.logger.warn({ err }, "reading a principal's dismissals failed"));
    const stopArrivals = this.hub.onArrival((name) => void remember(name));
    for (const name of this.hub.names()) void remember(name);
    this.#stopHearing = () => {
      stopArrivals();
      stopHearing();
    };
  }

  stop(): void {
    this.#stopHearing?.();
    this.#stopHearing = undefined;
  }

  dismiss(principal: Principal, sessionId: string): Promise<void> {
    return this.#set(principal, sessionId, true);
  }

  restore(principal: Principal, sessionId: string): Promise<void> {
    return this.#set(principal, sessionId, false);
  }

  /**
   * A `resume` call succeeded on the session: restore it if the principal dismissed it. Run once
   * the call's work is done and awaited before the call answers, so a client that got the answer
   * and lists at once finds the session (one indexed read when nothing was dismissed). A refused
   * call never gets here; a restore the store fails fails the call. A session deleted since the
   * read is on no list any more: nothing to restore, and the call's answer stands.
   */
  async restoreForWork(principal: Principal, sessionId: string): Promise<void> {
    if (!(await this.store.isDismissed(sessionId, principal.name))) return;
    try {
      await this.restore(principal, sessionId);
    } catch (err) {
      if (!(err instanceof SessionmuxError && err.code === "session_not_found")) throw err;
    }
  }

  /**
   * Another host's change: told to this host's sockets of that principal (the name the store
   * keys dismissals by, whatever their rank) with the session's row as it is now; nothing when
   * none is here or the session is gone.
   */
  #heard(change: DismissalChange): void {
    const { sessionId, principal, dismissed } = change;
    if (!this.hub.listensFor(principal)) return;
    this.#told = this.#told
      .then(async () => {
        const projection = await this.store.projection(sessionId);
        if (!projection) return;
        const notification = {
          name: "session.dismissed" as const,
          value: { sessionId, dismissed, row: toRow(projection, this.live) },
        };
        for (const admin of [false, true])
          this.hub.publishTo({ name: principal, admin }, projection.owner, notification);
      })
      .catch((err: unknown) =>
        this.logger.warn({ err, sessionId }, "telling another host's dismissal failed"),
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
