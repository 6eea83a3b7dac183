import type { IncomingMessage } from "node:http";
import { SessionmuxError } from "../../protocol/index.js";
import { type Principal, principalProblem } from "../host/principal.js";
import type { RefusalLog } from "./refusal-log.js";

/** An app's own authentication: the caller's principal, or `undefined` to refuse with 401. */
export type AuthenticateRequest = (
  request: IncomingMessage,
) => Principal | undefined | Promise<Principal | undefined>;

/** How much of the app's `authenticate` a crowd of requests may hold. */
export interface AuthenticateLimits {
  /**
   * @default 1,024 — calls of `authenticate` not settled yet; a request past it is refused 503
   * `overloaded` without calling it. A call holds its place until it settles, even after its
   * request was refused for taking too long.
   */
  maxPending: number;
  /** @default 10,000 — how long a request waits for `authenticate`; then 503 `overloaded`. */
  timeoutMs: number;
}

export const DEFAULT_AUTHENTICATE_LIMITS: AuthenticateLimits = { maxPending: 1_024, timeoutMs: 10_000 };

/**
 * Settles the app's `authenticate` (which may be async: a session lookup) before a request
 * reaches the transports, whose own check is synchronous and then reads the settled answer.
 * A throw or a malformed principal (a name outside the token names' alphabet and length, the
 * store's owner of every session it creates) refuses that request only (401), and is logged (within the
 * refusal log's budget, as every refusal is). A slow or stuck
 * `authenticate` must not let requests pile up: the calls in flight are bounded and each request
 * waits a bounded time, both refused `overloaded` (retryable) rather than 401, since the
 * credentials were never judged.
 */
export class AppAuthentication {
  readonly #settled = new WeakMap<IncomingMessage, Principal>();
  readonly #limits: AuthenticateLimits;
  #pending = 0;

  constructor(
    private readonly authenticate: AuthenticateRequest,
    private readonly log: RefusalLog,
    limits: Partial<AuthenticateLimits> = {},
  ) {
    this.#limits = { ...DEFAULT_AUTHENTICATE_LIMITS, ...limits };
  }

  /** Never rejects: null once the request may go on (to a 401 if no principal), else the refusal to answer. */
  async settle(request: IncomingMessage): Promise<SessionmuxError | null> {
    if (this.#pending >= this.#limits.maxPending) {
      return new SessionmuxError(
        "overloaded",
        `${this.#pending} authentications already in flight; retry shortly`,
      );
    }
    this.#pending++;
    const call = this.#principalOf(request).finally(() => this.#pending--);
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<"late">((resolve) => {
      timer = setTimeout(() => resolve("late"), this.#limits.timeoutMs);
    });
    const outcome = await Promise.race([call, late]);
    clearTimeout(timer);
    if (outcome === "late") {
      this.log.write(
        "error",
        { path: request.url, timeoutMs: this.#limits.timeoutMs },
        "authenticate did not settle in time; request refused",
      );
      return new SessionmuxError("overloaded", "authentication did not answer in time; retry shortly");
    }
    if (outcome) this.#settled.set(request, outcome);
    return null;
  }

  /** The synchronous resolver the transports call: what `settle` found. */
  readonly resolve = (request: IncomingMessage): Principal | undefined => this.#settled.get(request);

  async #principalOf(request: IncomingMessage): Promise<Principal | undefined> {
    let principal: Principal | undefined;
    try {
      principal = await this.authenticate(request);
    } catch (err) {
      this.log.write("error", { err, path: request.url }, "authenticate threw; request refused");
      return undefined;
    }
    if (principal === undefined || principal === null) return undefined;
    const problem = principalProblem(principal);
    if (problem) {
      // the name is not logged: it may be anything of any size
      this.log.write(
        "error",
        { path: request.url },
        problem.kind === "malformed_name"
          ? "authenticate returned a principal whose name is not 1-64 of letters, digits and ._@-; request refused"
          : 'authenticate returned a principal named "admin" that is not an admin (the name is reserved); request refused',
      );
      return undefined;
    }
    return Object.freeze({ name: principal.name, admin: principal.admin === true });
  }
}
