import type { Notification } from "../../protocol/index.js";
import { canSee, type Principal } from "./principal.js";

interface Subscriber {
  readonly principal: Principal;
  readonly listener: (notification: Notification) => void;
}

/** §6 notifications, each delivered only to principals who may see the session's owner. */
export class NotificationHub {
  readonly #subscribers = new Set<Subscriber>();

  subscribe(principal: Principal, listener: (notification: Notification) => void): () => void {
    const subscriber = { principal, listener };
    this.#subscribers.add(subscriber);
    return () => this.#subscribers.delete(subscriber);
  }

  publish(owner: string, notification: Notification): void {
    for (const s of this.#subscribers) {
      if (!canSee(s.principal, owner)) continue;
      try {
        s.listener(notification);
      } catch {
        // a faulty subscriber must not stop the others
      }
    }
  }

  clear(): void {
    this.#subscribers.clear();
  }
}
