import { SessionmuxError } from "../../protocol/index.js";
import { CountsByKey } from "../store/counts-by-key.js";

/** Forks one principal may have copying or waiting to copy at once on a host. */
export const DEFAULT_MAX_FORKS_PER_PRINCIPAL = 4;

/**
 * The copies `session.fork` makes, one at a time on a host. A fork copies its prefix (up to
 * 32,768 events or 32 MiB of event data) in one transaction, holding it in memory, and on SQLite in
 * one turn of the event loop (about half a second at the bound). The store commits every write
 * queued in the same turn together, so forks sent at once were copied in one transaction: 16 forks
 * of a 32,000-event prefix held a real host's event loop 27 s and took its resident memory from
 * 127 to 482 MiB. Taken one at a time, each copy is its own transaction (the next one starts once
 * the previous committed), so the loop turns between them and one prefix is held at once. A
 * principal has at most `maxPerPrincipal` forks copying or waiting (by name, admin too), so its
 * flood waits behind nobody's forks but its own and holds a bounded queue.
 */
export class ForkCopies {
  readonly #inFlight = new CountsByKey();
  #tail: Promise<void> = Promise.resolve();

  constructor(readonly maxPerPrincipal = DEFAULT_MAX_FORKS_PER_PRINCIPAL) {}

  /**
   * Runs `copy` once every fork given before it settled. Past the principal's bound it throws
   * `overloaded` (retryable: once one of its forks is answered), `data: {limit, max}`, and runs
   * nothing.
   */
  async run<T>(owner: string, copy: () => Promise<T>): Promise<T> {
    if (this.#inFlight.get(owner) >= this.maxPerPrincipal) {
      throw new SessionmuxError(
        "overloaded",
        `${owner} already has ${this.maxPerPrincipal} forks under way; fork again once one is answered`,
        { data: { limit: "forks_per_principal", max: this.maxPerPrincipal } },
      );
    }
    this.#inFlight.add(owner);
    const previous = this.#tail;
    let done!: () => void;
    this.#tail = new Promise<void>((resolve) => {
      done = resolve;
    });
    try {
      await previous;
      return await copy();
    } finally {
      done();
      this.#inFlight.add(owner, -1);
    }
  }
}
