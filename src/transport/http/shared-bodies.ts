/**
 * Attachment bodies are immutable: requests that read the same one while another request is
 * still sending it share those bytes instead of each holding its own copy from the store. An
 * entry lives only while some response uses it, so a deleted or expired attachment is never
 * served from here to a request that started after its last use.
 */
export class SharedBodies<T> {
  readonly #inUse = new Map<string, { value: Promise<T | null>; users: number }>();

  /** The body of `key`, loaded once for all concurrent users; call `release` when sent. */
  async acquire(
    key: string,
    load: () => Promise<T | null>,
  ): Promise<{ value: T | null; release: () => void }> {
    let entry = this.#inUse.get(key);
    if (!entry) {
      entry = { value: load(), users: 0 };
      this.#inUse.set(key, entry);
    }
    entry.users++;
    const held = entry;
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      if (--held.users === 0 && this.#inUse.get(key) === held) this.#inUse.delete(key);
    };
    try {
      return { value: await held.value, release };
    } catch (err) {
      release();
      throw err;
    }
  }
}
