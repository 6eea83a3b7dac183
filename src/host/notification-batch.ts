import type { Notification } from "../../protocol/index.js";
import type { Principal } from "./principal.js";

/**
 * A notification waiting for the end of the tick, with the owner its visibility is judged by, or
 * the one principal it is for (`only`: a dismissal concerns the principal who made it).
 */
export interface PendingNotification {
  readonly owner: string;
  readonly notification: Notification;
  readonly only?: Principal;
}

/**
 * One tick's §6 notifications in publish order. Only the newest `session.updated` row of a
 * session since its last `session.added`/`session.removed` is kept, in the place of the first:
 * notifications carry no sequence (§6), so an intermediate row tells a client nothing the newest
 * does not, and a client that misses one recovers with `session.list` anyway. `added`/`removed`
 * are never dropped and never move past an update of their session.
 */
export class NotificationBatch {
  readonly #entries: PendingNotification[] = [];
  /** Where each session's pending `session.updated` sits, until an added/removed of it. */
  readonly #updateAt = new Map<string, number>();

  /** Some entry is for one principal only: principals of the same rank may see different lists. */
  #personal = false;

  get entries(): readonly PendingNotification[] {
    return this.#entries;
  }

  get personal(): boolean {
    return this.#personal;
  }

  add(owner: string, notification: Notification, only?: Principal): void {
    const entry = only ? { owner, notification, only } : { owner, notification };
    if (only) this.#personal = true;
    if (notification.name === "session.updated") {
      const sessionId = notification.value.row.sessionId;
      const at = this.#updateAt.get(sessionId);
      if (at !== undefined) {
        this.#entries[at] = entry;
        return;
      }
      this.#updateAt.set(sessionId, this.#entries.length);
    } else if (notification.name === "session.added") {
      this.#updateAt.delete(notification.value.row.sessionId);
    } else if (notification.name === "session.removed" || notification.name === "session.dismissed") {
      this.#updateAt.delete(notification.value.sessionId);
    }
    this.#entries.push(entry);
  }
}
