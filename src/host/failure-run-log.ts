import type { Logger } from "pino";

/**
 * The log of a task repeated on a clock (a lease renewal round, a sweep) while it keeps failing:
 * the first failure of a run is logged at warn with its error, the later ones of the run only
 * counted, and the first success after it logged at info with how many failed. A database away
 * for an hour would otherwise write a warning every round (two every 3.3 s at the default lease
 * time), burying the lines that say what changed.
 */
export class FailureRunLog {
  readonly #logger: Logger;
  readonly #failedMsg: string;
  readonly #recoveredMsg: string;
  #failures = 0;

  constructor(logger: Logger, messages: { failed: string; recovered: string }) {
    this.#logger = logger;
    this.#failedMsg = messages.failed;
    this.#recoveredMsg = messages.recovered;
  }

  failed(err: unknown, fields: Record<string, unknown> = {}): void {
    this.#failures += 1;
    if (this.#failures === 1) this.#logger.warn({ ...fields, err }, this.#failedMsg);
  }

  succeeded(): void {
    if (this.#failures === 0) return;
    this.#logger.info({ failures: this.#failures }, this.#recoveredMsg);
    this.#failures = 0;
  }
}
