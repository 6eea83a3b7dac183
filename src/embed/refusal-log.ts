import type { IncomingMessage } from "node:http";
import type { Logger } from "pino";

/**
 * Logs refused requests, at most `perWindow` lines per window: a client hammering with a wrong
 * token, or while the app's `authenticate` fails, must not fill the disk with log lines. The count
 * of the lines left out is logged with the first refusal of a later window.
 */
export class RefusalLog {
  #windowStart = Number.NEGATIVE_INFINITY;
  #logged = 0;
  #suppressed = 0;

  constructor(
    private readonly logger: Logger,
    private readonly perWindow = 20,
    private readonly windowMs = 10_000,
    private readonly now: () => number = () => performance.now(),
  ) {}

  readonly refused = (
    req: IncomingMessage & { originalUrl?: string },
    code: "unauthorized" | "forbidden_origin",
  ): void => {
    const path = req.originalUrl ?? req.url;
    this.write("warn", { code, remote: req.socket.remoteAddress, path }, "request refused");
  };

  /**
   * One line about a refused request, within the window's budget. Its `path` is logged without
   * the query string: an app's `authenticate` may read a token from it (a browser's WebSocket
   * cannot send a header), and a refused request is where an expired or stolen one shows up.
   */
  write(level: "warn" | "error", fields: Record<string, unknown>, message: string): void {
    if (typeof fields.path === "string") fields = { ...fields, path: withoutQuery(fields.path) };
    const now = this.now();
    // a clock that went back starts a window too, or nothing would be logged until it caught up
    if (now - this.#windowStart >= this.windowMs || now < this.#windowStart) {
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
    this.logger[level]({ ...fields, ...(suppressed > 0 ? { suppressedBefore: suppressed } : {}) }, message);
  }
}

/** A request's path with its query string, if any, cut off (`?` kept, so a reader sees there was one). */
function withoutQuery(path: string): string {
  const query = path.indexOf("?");
  return query === -1 ? path : `${path.slice(0, query)}?…`;
}
