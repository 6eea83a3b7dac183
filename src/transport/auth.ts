import { createHash, timingSafeEqual } from "node:crypto";
import type { IncomingMessage } from "node:http";
import { BEARER_SUBPROTOCOL_PREFIX } from "../../protocol/index.js";
import { type Principal, principalProblem } from "../host/principal.js";

export interface TokenSpec {
  /** Principal name; `admin` principals see every session. */
  name: string;
  secret: string;
  admin: boolean;
}

/**
 * Parses `--token` values: a bare `T` is the admin principal, `name=secret` an ordinary one.
 */
export function parseTokenSpec(value: string): TokenSpec {
  const eq = value.indexOf("=");
  if (eq <= 0) return { name: "admin", secret: value, admin: true };
  return { name: value.slice(0, eq), secret: value.slice(eq + 1), admin: false };
}

/**
 * Refuses a token configuration in which two entries could be mistaken for each other: a
 * principal is its token entry, and its name is what the store records as a session's owner, so
 * names must be unique and none may pose as the admin (`admin`) or a wildcard (`*`). Throws an
 * Error whose message names the entry and says what to change.
 */
export function checkTokenSpecs(
  tokens: readonly TokenSpec[],
  /** How a message names an entry: the `--token` flag's form by default, an option's index when embedded. */
  entryName: (token: TokenSpec, index: number) => string = flagEntry,
): void {
  if (tokens.length === 0) throw new Error("at least one token is required");
  const names = new Set<string>();
  const secrets = new Set<string>();
  for (const [index, t] of tokens.entries()) {
    const entry = entryName(t, index);
    const problem = principalProblem(t);
    if (problem) throw new Error(`${entry}: ${problem.message}`);
    if (t.secret.length === 0 || t.secret.length > 4096)
      throw new Error(`${entry}: a secret is 1-4096 characters`);
    // `Authorization: Bearer` carries a token up to its first whitespace: a secret holding some
    // (a tokens-file line `alice: s3cret`, read as a bare admin token) would never match a request
    if (/\s/.test(t.secret)) throw new Error(`${entry}: ${WHITESPACE_SECRET}`);
    if (names.has(t.name))
      throw new Error(
        t.admin && entryName === flagEntry
          ? "more than one bare (admin) token: configure exactly one"
          : `${entry}: the name ${t.name} is used twice`,
      );
    if (secrets.has(t.secret)) throw new Error(`${entry}: the same secret is configured twice`);
    names.add(t.name);
    secrets.add(t.secret);
  }
}

const WHITESPACE_SECRET = "a secret holds no whitespace, which no Authorization: Bearer header carries";

/**
 * What is wrong with `token` as the metrics token beside `tokens`, or undefined. An empty one, or
 * one holding whitespace, is a token no `Authorization: Bearer` header carries: `/metrics` would
 * refuse every scraper while the host looked configured.
 */
export function metricsTokenProblem(token: string, tokens: readonly TokenSpec[]): string | undefined {
  if (token.length === 0 || token.length > 4096) return "a secret is 1-4096 characters";
  if (/\s/.test(token)) return WHITESPACE_SECRET;
  if (tokens.some((t) => t.secret === token)) return "it must differ from every principal's token";
  return undefined;
}

/**
 * What is wrong with `origin` as an allowed Origin, or undefined. A browser's `Origin` header is
 * `scheme://host[:port]` and nothing more, compared as a whole: an entry without its scheme
 * (`app.example.com`) or with a path (a trailing `/`) matched no request, so that app's browser
 * calls were refused `forbidden_origin` while the host looked configured.
 */
export function originProblem(origin: string): string | undefined {
  if (/^[a-z][a-z0-9+.-]*:\/\/[^/?#\s@]+$/i.test(origin)) return undefined;
  return `${JSON.stringify(origin)} is no origin: a browser sends scheme://host[:port] without a path, such as "https://app.example.com"`;
}

/** A token entry as `serve`'s flags give it. */
const flagEntry = (t: TokenSpec): string => (t.admin ? "the bare (admin) token" : `--token ${t.name}=…`);

export type AuthOutcome = { ok: true; principal: Principal } | { ok: false; status: 401 | 403; code: string };

/** Finds the principal of a request by other means than the token list (an app's own auth). */
export type PrincipalResolver = (req: IncomingMessage) => Principal | undefined;

export interface AuthenticatorOptions {
  allowedOrigins?: string[];
  /** Replaces the token list: `undefined` refuses the request with 401. */
  resolve?: PrincipalResolver;
  /** A token that reads `/metrics` and nothing else (as does any admin token). */
  metricsToken?: string;
  /** Told of every refusal, for the log. */
  onRefused?: (req: IncomingMessage, code: "unauthorized" | "forbidden_origin") => void;
}

/** Bearer-token authentication and Origin checks shared by the mux upgrade and the HTTP routes. */
export class Authenticator {
  readonly #tokens: { digest: Buffer; principal: Principal }[];
  readonly #allowedOrigins: Set<string>;
  readonly #resolve: PrincipalResolver | undefined;
  readonly #onRefused: AuthenticatorOptions["onRefused"];

  readonly #metricsDigest: Buffer | undefined;

  constructor(tokens: TokenSpec[], options: AuthenticatorOptions = {}) {
    if (!options.resolve || tokens.length > 0) checkTokenSpecs(tokens);
    const metricsProblem =
      options.metricsToken === undefined ? undefined : metricsTokenProblem(options.metricsToken, tokens);
    if (metricsProblem) throw new Error(`the metrics token: ${metricsProblem}`);
    this.#metricsDigest = options.metricsToken === undefined ? undefined : digest(options.metricsToken);
    this.#resolve = options.resolve;
    this.#onRefused = options.onRefused;
    this.#tokens = tokens.map((t) => ({
      digest: digest(t.secret),
      principal: Object.freeze({ name: t.name, admin: t.admin }),
    }));
    this.#allowedOrigins = new Set((options.allowedOrigins ?? []).map((o) => o.toLowerCase()));
  }

  /**
   * Compares digests in constant time; every configured token is compared so timing does not
   * reveal which one matched.
   */
  principalFor(secret: string | undefined): Principal | undefined {
    if (secret === undefined || secret.length === 0 || secret.length > 4096) return undefined;
    const d = digest(secret);
    let found: Principal | undefined;
    for (const t of this.#tokens) {
      if (timingSafeEqual(d, t.digest) && !found) found = t.principal;
    }
    return found;
  }

  /**
   * `/metrics` shows every principal's activity: readable with an admin token or the separate
   * metrics token only. A refused token or Origin is reported as every other route's is (the log,
   * `sessionmux_refused_total`): a scraper left with an old token showed nowhere but in its own
   * target's status.
   */
  metricsAccess(req: IncomingMessage): "ok" | "unauthorized" | "forbidden" | "forbidden_origin" {
    if (!this.originAllowed(req)) {
      this.#onRefused?.(req, "forbidden_origin");
      return "forbidden_origin";
    }
    const secret = Authenticator.tokenOf(req, { allowSubprotocol: false });
    if (secret !== undefined && this.#metricsDigest !== undefined && secret.length <= 4096) {
      if (timingSafeEqual(digest(secret), this.#metricsDigest)) return "ok";
    }
    const principal = this.#resolve ? this.#resolve(req) : this.principalFor(secret);
    if (!principal) {
      this.#onRefused?.(req, "unauthorized");
      return "unauthorized";
    }
    return principal.admin ? "ok" : "forbidden";
  }

  /** The bearer token of a request: the Authorization header, else the `bearer.` subprotocol entry. */
  static tokenOf(req: IncomingMessage, options: { allowSubprotocol: boolean }): string | undefined {
    const header = req.headers.authorization;
    if (typeof header === "string") {
      const m = /^Bearer +(\S+)\s*$/i.exec(header);
      return m?.[1];
    }
    if (!options.allowSubprotocol) return undefined;
    const proto = req.headers["sec-websocket-protocol"];
    if (typeof proto !== "string" || proto.length > 8192) return undefined;
    for (const raw of proto.split(",")) {
      const entry = raw.trim();
      if (entry.startsWith(BEARER_SUBPROTOCOL_PREFIX)) {
        return decodeBase64Url(entry.slice(BEARER_SUBPROTOCOL_PREFIX.length));
      }
    }
    return undefined;
  }

  /** An Origin that is present must be the request's own or a configured one. */
  originAllowed(req: IncomingMessage): boolean {
    const origin = req.headers.origin;
    if (origin === undefined) return true;
    const o = origin.toLowerCase();
    if (this.#allowedOrigins.has(o)) return true;
    const host = req.headers.host;
    if (!host) return false;
    const h = host.toLowerCase();
    return o === `http://${h}` || o === `https://${h}`;
  }

  authenticate(req: IncomingMessage, options: { allowSubprotocol: boolean }): AuthOutcome {
    const principal = this.#resolve
      ? this.#resolve(req)
      : this.principalFor(Authenticator.tokenOf(req, options));
    if (!principal) {
      this.#onRefused?.(req, "unauthorized");
      return { ok: false, status: 401, code: "unauthorized" };
    }
    if (!this.originAllowed(req)) {
      this.#onRefused?.(req, "forbidden_origin");
      return { ok: false, status: 403, code: "forbidden_origin" };
    }
    return { ok: true, principal };
  }
}

function digest(secret: string): Buffer {
  return createHash("sha256").update(secret, "utf8").digest();
}

function decodeBase64Url(value: string): string | undefined {
  if (!/^[A-Za-z0-9_-]*={0,2}$/.test(value)) return undefined;
  return Buffer.from(value, "base64url").toString("utf8");
}

export function encodeBearerSubprotocol(token: string): string {
  return BEARER_SUBPROTOCOL_PREFIX + Buffer.from(token, "utf8").toString("base64url");
}
