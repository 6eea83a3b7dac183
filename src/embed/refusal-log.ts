import type { IncomingMessage } from "node:http";
import type { Logger } from "pino";

/**
 * Logs refused requests, at most `perWindow` lines per window: a client hammering with a wrong
 * token must not fill the disk with log lines. The count of the lines left out is logged with
 * the first refusal of a later window.
 */
export class RefusalLog {
  #windowStart = Number.NEGATIVE_INFINITY;
  #logged = 0;
  #suppressed = 0;

  constructor(
    private readonly logger: Logger,
    private readonly perWindow = 20,
    private readonly windowMs = 10_000,
    private readonly now: () => number = Date.now,
  ) {}

  readonly refused = (req: IncomingMessage, code: "unauthorized" | "forbidden_origin"): void => {
    const now = this.now();
    if (now - this.#windowStart >= this.windowMs) {
      this.#windowStart = now;
      this.#logged = 0;
    }
    if (this.#logged >= this.perWindow) {
      this.#suppressed++;
      return;
    }
    this.#logged++;
    const suppressed = this.#suppressed;
    this.#suppressed = 0;
    this.logger.warn(
      {
        code,
        remote: req.socket.remoteAddress,
        path: req.url,
        ...(suppressed > 0 ? { suppressedBefore: suppressed } : {}),
      },
      "request refused",
    );
  };
}
