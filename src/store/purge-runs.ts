import { setImmediate as nextTurn } from "node:timers/promises";

/** A failed step is tried again after this long (a full disk frees up, the database comes back). */
const RETRY_MS = 1_000;

/**
 * How a store's purger runs its steps (`SqlitePurger`, `PgPurger`): one step per turn of the event
 * loop while a step says more may be left, woken by clears and deletes (and at open); a wake during
 * a run makes it look again before it ends; a failed step is reported and the run woken again a
 * second later; nothing starts once stopped.
 */
export class PurgeRuns {
  #running: Promise<void> | undefined;
  /** Woken while a run was going: it looks again before it ends. */
  #wanted = false;
  #stopped = false;
  #retry: NodeJS.Timeout | undefined;

  constructor(
    /** One bounded step; answers whether one may be left after it. */
    private readonly step: () => Promise<boolean>,
    private readonly onError: (err: unknown) => void,
  ) {}

  get stopped(): boolean {
    return this.#stopped;
  }

  get running(): boolean {
    return this.#running !== undefined;
  }

  /** Starts a run, if none is going; it ends once nothing is left. */
  wake(): void {
    if (this.#stopped) return;
    this.#wanted = true;
    this.#running ??= this.#run();
  }

  /** Resolves when the current run ends (at once when none runs). */
  settled(): Promise<void> {
    return this.#running ?? Promise.resolve();
  }

  /** No step starts after this; one under way ends as it would. */
  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#retry);
  }

  async #run(): Promise<void> {
    try {
      while (this.#wanted && !this.#stopped) {
        this.#wanted = false;
        while (!this.#stopped && (await this.step())) await nextTurn();
      }
    } catch (err) {
      if (!this.#stopped) {
        this.onError(err);
        this.#retry = setTimeout(() => this.wake(), RETRY_MS);
        this.#retry.unref();
      }
    } finally {
      this.#running = undefined;
    }
  }
}
