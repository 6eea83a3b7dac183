/**
 * Listeners to call in subscription order, each call over the list as it stood when the call
 * began: one subscribing or leaving meanwhile changes the next call, not this one. The array
 * handed out is rebuilt only after a change, so a commit notice delivered to thousands of
 * followers costs no copy of the list per notice.
 */
export class ListenerList<L> {
  readonly #listeners = new Set<L>();
  #snapshot: readonly L[] | undefined;

  get size(): number {
    return this.#listeners.size;
  }

  add(listener: L): void {
    this.#listeners.add(listener);
    this.#snapshot = undefined;
  }

  delete(listener: L): void {
    if (this.#listeners.delete(listener)) this.#snapshot = undefined;
  }

  /** The current listeners; never changed afterwards (a change makes a new array). */
  current(): readonly L[] {
    this.#snapshot ??= [...this.#listeners];
    return this.#snapshot;
  }
}
