import type { Logger } from "pino";
import { type NotReadyCode, notReady, type Readiness } from "../../protocol/index.js";

export type { Readiness } from "../../protocol/index.js";

/** A check's failure that answers its own code rather than `db_unavailable`. */
export class NotReadyError extends Error {
  override readonly name = "NotReadyError";

  constructor(
    readonly code: NotReadyCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/**
 * Answers `/readyz` from the last result of a periodic check instead of checking per request,
 * so a burst of probes costs nothing and a hung check shows as stale rather than piling up.
 * Once stopped it stays "shutting down": a check still under way (a PostgreSQL round trip) when
 * the host began to close must not report it ready again while it drains.
 *
 * A failed check answers the stable `db_unavailable` (or the code of a `NotReadyError` it threw):
 * anyone may ask `/readyz`, and the error names an address, a file or the server's words. The error itself is logged at warn when the
 * host stops being ready (and at info when it is ready again), not at every check, so a database
 * down for an hour costs two lines, not one per interval.
 */
export class ReadinessProbe {
  #last: Readiness = notReady("not_checked", 0);
  #timer: ReturnType<typeof setInterval> | undefined;
  #running = false;
  #stopped = false;
  #failing = false;

  constructor(
    private readonly check: () => unknown,
    private readonly intervalMs: number,
    private readonly now: () => number = Date.now,
    private readonly logger?: Pick<Logger, "warn" | "info">,
  ) {}

  async start(): Promise<void> {
    await this.#run();
    if (this.#stopped) return;
    this.#timer = setInterval(() => void this.#run(), this.intervalMs);
    this.#timer.unref();
  }

  stop(): void {
    this.#stopped = true;
    clearInterval(this.#timer);
    this.#last = notReady("shutting_down", this.now());
  }

  /** Not ready when the last check failed or is older than three intervals. */
  current(): Readiness {
    if (this.#last.ready && this.now() - this.#last.checkedAt > 3 * this.intervalMs) {
      return notReady("check_stale", this.#last.checkedAt);
    }
    return this.#last;
  }

  async #run(): Promise<void> {
    if (this.#running) return;
    this.#running = true;
    try {
      await this.check();
      if (this.#stopped) return;
      this.#last = { ready: true, checkedAt: this.now() };
      if (this.#failing) this.logger?.info("readiness check passes again: ready");
      this.#failing = false;
    } catch (err) {
      if (this.#stopped) return;
      this.#last = notReady(err instanceof NotReadyError ? err.code : "db_unavailable", this.now());
      if (!this.#failing) this.logger?.warn({ err }, "readiness check failed: not ready");
      this.#failing = true;
    } finally {
      this.#running = false;
    }
  }
}
