import type { Principal } from "./principal.js";

/**
 * Subscribers kept by whose sessions they may see: an admin's every session's, any other
 * principal's its own (`canSee`). A change of one owner's session then reaches its owner's and the
 * admins' subscribers without a look at anybody else's: a principal's thousands of open streams
 * cost other principals' changes nothing.
 */
export class SubscribersByOwner<S> {
  readonly #admins = new Set<S>();
  readonly #byName = new Map<string, Set<S>>();
  #size = 0;

  get size(): number {
    return this.#size;
  }

  /** Adds `subscriber` for `principal`; answers its removal (once, however often called). */
  add(principal: Principal, subscriber: S): () => void {
    const admin = principal.admin;
    const name = principal.name;
    let set = admin ? this.#admins : this.#byName.get(name);
    if (!set) {
      set = new Set();
      this.#byName.set(name, set);
    }
    const own = set;
    own.add(subscriber);
    this.#size++;
    return () => {
      if (!own.delete(subscriber)) return;
      this.#size--;
      if (!admin && own.size === 0 && this.#byName.get(name) === own) this.#byName.delete(name);
    };
  }

  /** Every subscriber that may see `owner`'s sessions, in the order each group was added. */
  *seeing(owner: string): Iterable<S> {
    yield* this.#byName.get(owner) ?? [];
    yield* this.#admins;
  }

  clear(): void {
    this.#admins.clear();
    this.#byName.clear();
    this.#size = 0;
  }
}
