import type { Notification } from "../../protocol/index.js";
import { NotificationBatch } from "./notification-batch.js";
import { canSee, type Principal } from "./principal.js";

/** One tick's notifications as one subscriber may see them; never empty. */
export type NotificationList = readonly Notification[];

interface Subscriber {
  readonly principal: Principal;
  readonly deliver: (list: NotificationList) => void;
}

/**
 * §6 notifications, each delivered only to principals who may see the session's owner.
 *
 * What is published in one synchronous run (a commit publishes all its notices in one) is
 * coalesced (see `NotificationBatch`) and delivered together once that run ends, before any
 * promise it settled resumes. Subscribers who see the same notifications receive the same frozen
 * list instance, so a transport can encode it once for all of them, keyed by identity.
 */
export class NotificationHub {
  readonly #subscribers = new Set<Subscriber>();
  #pending: NotificationBatch | undefined;

  /** One call per notification, in order. */
  subscribe(principal: Principal, listener: (notification: Notification) => void): () => void {
    return this.subscribeLists(principal, (list) => {
      for (const notification of list) {
        try {
          listener(notification);
        } catch {
          // a faulty listener must not lose the rest of the tick
        }
      }
    });
  }

  /** One call per tick with everything the principal may see of it, in order. */
  subscribeLists(principal: Principal, deliver: (list: NotificationList) => void): () => void {
    const subscriber = { principal, deliver };
    this.#subscribers.add(subscriber);
    return () => this.#subscribers.delete(subscriber);
  }

  publish(owner: string, notification: Notification): void {
    this.#batch().add(owner, notification);
  }

  #batch(): NotificationBatch {
    if (!this.#pending) {
      this.#pending = new NotificationBatch();
      queueMicrotask(() => this.#flush());
    }
    return this.#pending;
  }

  /** For `principal` alone (same name and rank), whoever else may see the session. */
  publishTo(principal: Principal, owner: string, notification: Notification): void {
    this.#batch().add(owner, notification, principal);
  }

  clear(): void {
    this.#subscribers.clear();
    this.#pending = undefined;
  }

  #flush(): void {
    const batch = this.#pending;
    this.#pending = undefined;
    if (!batch) return;
    // canSee(principal, owner) depends only on `admin` and `name`: one list per admin/name, and
    // one for all admins unless an entry is for one principal only.
    let forAdmins: NotificationList | undefined;
    const byName = new Map<string, NotificationList>();
    const shareAdmins = !batch.personal;
    for (const s of this.#subscribers) {
      const shared = s.principal.admin && shareAdmins;
      const cached = shared ? forAdmins : byName.get(`${s.principal.admin}:${s.principal.name}`);
      const list = cached ?? visibleTo(s.principal, batch);
      if (!cached) {
        if (shared) forAdmins = list;
        else byName.set(`${s.principal.admin}:${s.principal.name}`, list);
      }
      if (list.length === 0) continue;
      try {
        s.deliver(list);
      } catch {
        // a faulty subscriber must not stop the others
      }
    }
  }
}

function visibleTo(principal: Principal, batch: NotificationBatch): NotificationList {
  const list: Notification[] = [];
  for (const e of batch.entries) {
    const visible = e.only
      ? e.only.name === principal.name && e.only.admin === principal.admin
      : canSee(principal, e.owner);
    if (visible) list.push(e.notification);
  }
  return Object.freeze(list);
}
