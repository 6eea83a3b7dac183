export interface Readiness {
  ready: boolean;
  /** Epoch ms of the last check; 0 before the first one. */
  checkedAt: number;
  /** Why the host is not ready. */
  reason?: string;
}

/**
 * Answers `/readyz` from the last result of a periodic check instead of checking per request,
 * so a burst of probes costs nothing and a hung check shows as stale rather than piling up.
 * Once stopped it stays "shutting down": a check still under way (a PostgreSQL round trip) when
 * the host began to close must not report it ready again while it drains.
 */
export class ReadinessProbe {
  #last: Readiness = { ready: false, checkedAt: 0, reason: "not checked yet" };
  #timer: ReturnType<typeof setInterval> | undefined;
  #running = false;
  #stopped = false;

  constructor(
    private readonly check: () => void | Promise<void>,
    private readonly intervalMs: number,
    private readonly now: () => number = Date.now,
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
    this.#last = { ready: false, checkedAt: this.now(), reason: "shutting down" };
  }

  /** Not ready when the last check failed or is older than three intervals. */
  current(): Readiness {
    if (this.#last.ready && this.now() - this.#last.checkedAt > 3 * this.intervalMs) {
      return { ready: false, checkedAt: this.#last.checkedAt, reason: "last check is stale" };
    }
    return this.#last;
  }

  async #run(): Promise<void> {
    if (this.#running) return;
    this.#running = true;
    try {
      await this.check();
      if (!this.#stopped) this.#last = { ready: true, checkedAt: this.now() };
    } catch (err) {
      if (!this.#stopped)
        this.#last = {
          ready: false,
          checkedAt: this.now(),
          reason: err instanceof Error ? err.message : String(err),
        };
    } finally {
      this.#running = false;
    }
  }
}
