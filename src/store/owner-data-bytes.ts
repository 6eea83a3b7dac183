/**
 * Stored event data one transaction added (or, negative, removed) per owner: both stores write it
 * to `owner_usage` in one statement for all its owners just before COMMIT, never once per append.
 */
export class OwnerDataBytes {
  readonly #bytes = new Map<string, number>();

  add(owner: string, bytes: number): void {
    this.#bytes.set(owner, (this.#bytes.get(owner) ?? 0) + bytes);
  }

  /** The owners' bytes were counted again from the rows: what was added so far is in that count. */
  clear(): void {
    this.#bytes.clear();
  }

  /**
   * Each owner whose stored data moved, with how much, in owner order: two transactions that write
   * several owners' rows take their locks in one order.
   */
  moved(): [owner: string, bytes: number][] {
    return [...this.#bytes].filter(([, bytes]) => bytes !== 0).sort(([a], [b]) => (a < b ? -1 : 1));
  }
}
