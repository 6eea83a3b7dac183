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
  /** Subscribers by what they may see: admins see every session, others their own. */
  readonly #admins = new Set<Subscriber>();
  readonly #byName = new Map<string, Set<Subscriber>>();
  readonly #arrivals = new Set<(name: string) => void>();
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
    if (this.#arrivals.size > 0 && !this.listensFor(principal.name))
      for (const arrived of this.#arrivals) arrived(principal.name);
    if (principal.admin) this.#admins.add(subscriber);
    else {
      let named = this.#byName.get(principal.name);
      if (!named) {
        named = new Set();
        this.#byName.set(principal.name, named);
      }
      named.add(subscriber);
    }
    return () => {
      if (principal.admin) this.#admins.delete(subscriber);
      else {
        const named = this.#byName.get(principal.name);
        named?.delete(subscriber);
        if (named?.size === 0) this.#byName.delete(principal.name);
      }
    };
  }

  /** The names of the principals subscribed here, each once (admins' included). */
  *names(): Iterable<string> {
    const admins = new Set<string>();
    for (const s of this.#admins) admins.add(s.principal.name);
    for (const name of admins) if (!this.#byName.has(name)) yield name;
    yield* this.#byName.keys();
  }

  /** Calls `listener` with a name whenever a subscriber of that name arrives and none was here. */
  onArrival(listener: (name: string) => void): () => void {
    this.#arrivals.add(listener);
    return () => {
      this.#arrivals.delete(listener);
    };
  }

  /** Whether a principal of that name (of either rank) is subscribed here. */
  listensFor(name: string): boolean {
    if (this.#byName.has(name)) return true;
    for (const s of this.#admins) if (s.principal.name === name) return true;
    return false;
  }

  /** Principal names with a subscriber (for tests of its bound: a name none listens for is dropped). */
  get subscribedNames(): number {
    return this.#byName.size;
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
    this.#admins.clear();
    this.#byName.clear();
    this.#pending = undefined;
  }

  #flush(): void {
    const batch = this.#pending;
    this.#pending = undefined;
    if (!batch) return;
    if (batch.personal) this.#flushPersonal(batch);
    else this.#flushShared(batch);
  }

  /**
   * No entry is for one principal only: admins share one list of everything, and everyone else
   * one list per owner, found by owner rather than by asking every subscriber about every entry
   * (a tick of many owners' commits, each with a socket of its own, would cost their product).
   */
  #flushShared(batch: NotificationBatch): void {
    if (this.#admins.size > 0) {
      const all = Object.freeze(batch.entries.map((e) => e.notification));
      for (const s of this.#admins) deliverTo(s, all);
    }
    if (this.#byName.size === 0) return;
    const byOwner = new Map<string, Notification[]>();
    for (const e of batch.entries) {
      if (!this.#byName.has(e.owner)) continue;
      const list = byOwner.get(e.owner);
      if (list) list.push(e.notification);
      else byOwner.set(e.owner, [e.notification]);
    }
    for (const [owner, list] of byOwner) {
      const named = this.#byName.get(owner);
      if (!named) continue;
      const frozen = Object.freeze(list);
      for (const s of named) deliverTo(s, frozen);
    }
  }

  *#everyone(): Iterable<Subscriber> {
    yield* this.#admins;
    for (const named of this.#byName.values()) yield* named;
  }

  /** Some entry is for one principal only: each principal's list is judged entry by entry. */
  #flushPersonal(batch: NotificationBatch): void {
    // canSee(principal, owner) depends only on `admin` and `name`: one list per admin/name.
    const byName = new Map<string, NotificationList>();
    for (const s of this.#everyone()) {
      const key = `${s.principal.admin}:${s.principal.name}`;
      let list = byName.get(key);
      if (!list) {
        list = visibleTo(s.principal, batch);
        byName.set(key, list);
      }
      if (list.length > 0) deliverTo(s, list);
    }
  }
}

function deliverTo(subscriber: Subscriber, list: NotificationList): void {
  try {
    subscriber.deliver(list);
  } catch {
    // a faulty subscriber must not stop the others
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
