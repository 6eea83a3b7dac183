/**
 * A count per key (things held, bytes held) where a key whose count falls to zero is not kept:
 * the map holds only the keys counted now, so its size is bounded by what is held, not by every
 * key ever counted. It lives with the store, the one layer the host and transport already import.
 */
export class CountsByKey<K = string> {
  readonly #counts = new Map<K, number>();

  /** The key's count; 0 for a key not kept. */
  get(key: K): number {
    return this.#counts.get(key) ?? 0;
  }

  /** Adds `by` (negative to take away) to the key's count and returns it; at zero or below the key goes. */
  add(key: K, by = 1): number {
    const count = this.get(key) + by;
    if (count > 0) this.#counts.set(key, count);
    else this.#counts.delete(key);
    return count;
  }

  /** Whether the key's count is above zero. */
  has(key: K): boolean {
    return this.#counts.has(key);
  }

  /** Keys whose count is above zero. */
  get size(): number {
    return this.#counts.size;
  }

  keys(): IterableIterator<K> {
    return this.#counts.keys();
  }
}
