import type { IncomingMessage } from "node:http";
import type { Logger } from "pino";
import type { Principal } from "../host/principal.js";

/** An app's own authentication: the caller's principal, or `undefined` to refuse with 401. */
export type AuthenticateRequest = (
  request: IncomingMessage,
) => Principal | undefined | Promise<Principal | undefined>;

/**
 * Settles the app's `authenticate` (which may be async: a session lookup) before a request
 * reaches the transports, whose own check is synchronous and then reads the settled answer.
 * A throw or a malformed principal refuses that request only, and is logged.
 */
export class AppAuthentication {
  readonly #settled = new WeakMap<IncomingMessage, Principal>();

  constructor(
    private readonly authenticate: AuthenticateRequest,
    private readonly logger: Logger,
  ) {}

  /** Never rejects. */
  async settle(request: IncomingMessage): Promise<void> {
    const principal = await this.#principalOf(request);
    if (principal) this.#settled.set(request, principal);
  }

  /** The synchronous resolver the transports call: what `settle` found. */
  readonly resolve = (request: IncomingMessage): Principal | undefined => this.#settled.get(request);

  async #principalOf(request: IncomingMessage): Promise<Principal | undefined> {
    let principal: Principal | undefined;
    try {
      principal = await this.authenticate(request);
    } catch (err) {
      this.logger.error({ err, path: request.url }, "authenticate threw; request refused");
      return undefined;
    }
    if (principal === undefined || principal === null) return undefined;
    if (typeof principal.name !== "string" || principal.name.length === 0) {
      this.logger.error(
        { path: request.url },
        "authenticate returned a principal without a name; request refused",
      );
      return undefined;
    }
    return Object.freeze({ name: principal.name, admin: principal.admin === true });
  }
}
