import type { IncomingMessage, Server, ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import type { Logger } from "pino";
import type { AgentDriver } from "../agents/agent.js";
import type { SessionmuxClient } from "../client/client.js";
import type { Principal } from "../host/principal.js";
import type { CallInboxLimits } from "../store/call-inbox-limits.js";
import type { SessionStore } from "../store/session-store.js";
import type { TokenSpec } from "../transport/auth.js";
import type { HttpOptions } from "../transport/http/router.js";
import type { InProcessClientOptions } from "../transport/in-process/in-process-connector.js";
import type { HostMetrics } from "../transport/metrics.js";
import type { MuxOptionsInput } from "../transport/mux/mux-server.js";
import type { PrincipalLimitOptions } from "../transport/principal-limits.js";
import type { AuthenticateLimits, AuthenticateRequest } from "./app-authentication.js";
import { mountSessionmux } from "./mount-sessionmux.js";

export interface SessionmuxOptions {
  /**
   * A SQLite database file (its folder must exist unless `createDbFolder` is set), or a
   * `postgres://user@host:5432/db` URL: any number of hosts may share one PostgreSQL database.
   * The schema is created and migrated when missing.
   */
  db: string;
  /** @default false — a missing database folder is refused (most often a misspelled path). */
  createDbFolder?: boolean;
  /** PostgreSQL only: the schema holding the tables. @default "public" */
  dbSchema?: string;
  /** PostgreSQL only: pooled connections of the store (one more listens). @default 10 */
  dbPoolSize?: number;
  /**
   * PostgreSQL only: how often each LISTEN connection (commit wake-ups, forwarded calls) is asked
   * `SELECT 1`, and how long its answer may take: one whose network path went silent is dropped
   * and reconnected within twice this (docs/reliability.md, "The PostgreSQL store keeps promises 1–3"). At least 100.
   * @default 5000
   */
  dbListenCheckMs?: number;
  /**
   * PostgreSQL only: how often a statement still waiting on the database (a write transaction, a
   * read, a forwarded call's, an upload quota's) is checked from another connection: one whose
   * connection went silent fails within two or three times this, and a new connection's
   * handshake may take twice this; one waiting on a lock is left to wait. At least 100.
   * @default 5000
   */
  dbQueryCheckMs?: number;
  /**
   * Names this host among several on one database (leases, forwarded calls, `/metrics`):
   * letters, digits, `.`, `_`, `-`. @default the machine's name and a random suffix
   */
  hostId?: string;
  /**
   * How long a host's lease on a session's agent lasts without renewal; past it another host may
   * take the session over (docs/reliability.md, "Several hosts"). @default 10_000
   */
  leaseTtlMs?: number;
  /**
   * PostgreSQL only: what the inbox of calls forwarded between hosts holds at once, as a sender
   * and as the owner that runs them, and how long a sender waits on a call its owner claimed
   * (`claimedWaitMs`, at least the forward wait of 5 s) (docs/reliability.md, "Limits"; `serve`'s
   * `--max-forwarded-…`, `--max-serving-…` and `--claimed-call-wait-ms` flags).
   */
  callInbox?: Partial<CallInboxLimits>;
  /** @default new DemoAgent() */
  agent?: AgentDriver;
  /** Bearer tokens: the default authentication. Required unless `authenticate` is given; refused beside it, which would leave them unread. */
  tokens?: TokenSpec[];
  /**
   * The app's own authentication, replacing the token list: return (or resolve to) the caller's
   * principal, or `undefined` to refuse with 401. Called once for every HTTP request and mux
   * upgrade sessionmux answers; an exception refuses the request and is logged. The principal's
   * name owns the sessions it creates: 1-64 of letters, digits and `._@-`, starting with a letter
   * or digit (as a token entry's); another name refuses the request with 401 and is logged.
   */
  authenticate?: AuthenticateRequest;
  /**
   * Bounds on `authenticate`: calls in flight at once (@default 1,024) and how long a request waits
   * for one (@default 10,000 ms); past either the request is refused 503 `overloaded`.
   */
  authenticateLimits?: Partial<AuthenticateLimits>;
  /** Browser origins allowed to call the HTTP routes (CORS) and open the mux. @default [] */
  cors?: string[];
  /** Path prefix of every route and of the mux, e.g. `"/chat"`. @default "" (the API paths at the root) */
  basePath?: string;
  /** @default 600_000 (10 minutes) */
  idleDetachMs?: number;
  /**
   * How long a cancelled turn (or one stopped by shutdown) waits for the agent to return; past it
   * the turn is closed without the agent, whose later emits are refused. @default 5_000
   */
  turnStopGraceMs?: number;
  /**
   * Bytes of attachments one principal's running turns may hold, admin too (docs/reliability.md,
   * "Limits"; `serve`'s `--max-turn-attachment-bytes`). @default 64 MiB
   */
  maxTurnAttachmentBytes?: number;
  /**
   * Where the host logs (refused requests, an agent that threw, a failed shutdown step): a pino
   * logger, as `serve` uses. @default warnings and errors as JSON lines on stderr; pass
   * `pino({ enabled: false })` for none
   */
  logger?: Logger;
  /**
   * Mux limits (protocol-v1 §7), passed through; per-principal ones are `principals`
   * (docs/reliability.md, "Limits", lists each with its `serve` flag).
   */
  mux?: Omit<MuxOptionsInput, "logger" | "metrics" | "principalLimits">;
  /** HTTP limits and the console folder, passed through (the host logs on `logger`). */
  http?: Partial<Omit<HttpOptions, "metrics" | "logger" | "uploadLedger" | "readiness">>;
  /** Node process metrics (CPU, memory, event loop lag) at `/metrics`. @default true */
  processMetrics?: boolean;
  /** How often `/readyz` checks that the database takes a write lock. @default 5000 */
  readinessIntervalMs?: number;
  /** A token that reads `/metrics` and nothing else (admin tokens read it too). */
  metricsToken?: string;
  /** Sockets, session creations, live sessions and stored bytes per principal (docs/reliability.md, "Limits"). */
  principals?: Partial<PrincipalLimitOptions>;
  /** @default 1 hour — uploads no prompt references by then are deleted. */
  uploadTtlMs?: number;
}

/** Express/Connect-style: `next` is called for every request that is not sessionmux's. */
export type RequestHandler = (
  req: IncomingMessage,
  res: ServerResponse,
  next?: (err?: unknown) => void,
) => void;
/** Returns false, leaving the socket untouched, when the upgrade is not for the mux. */
export type UpgradeHandler = (req: IncomingMessage, socket: Duplex, head: Buffer) => boolean;

export interface Sessionmux {
  /** The normalized base path (`""` at the root). */
  readonly basePath: string;
  /** The mux URL path, e.g. `/chat/api/remote.mux`. */
  readonly muxPath: string;
  readonly handler: RequestHandler;
  readonly upgrade: UpgradeHandler;
  /**
   * Mounts on `server`: its request listeners registered so far get every request that is not
   * sessionmux's; upgrades for other paths are left to its other `upgrade` listeners. Returns a
   * function that undoes this.
   */
  attach(server: Server): () => void;
  readonly store: SessionStore;
  readonly metrics: HostMetrics;
  /**
   * A client for code in this process (a scheduler, the app itself) acting as `principal`: the
   * SDK's client (`call`, `follow`, `control`, notifications) over an in-memory connection through
   * the same mux, so the same activation policy, limits and visibility rules apply. Closed by
   * `close()` if still open.
   */
  connect(principal: Principal, options?: InProcessClientOptions): SessionmuxClient;
  /** This host's id (see `hostId`). */
  readonly hostId: string;
  /**
   * Closes the mux connections (their calls in flight answered first, for up to 10 s), stops the
   * agents and closes the database; the server stays up.
   */
  close(): Promise<void>;
}

/**
 * Embeds sessionmux in an existing Node HTTP server: the durable store, the host, the mux and
 * the HTTP routes, under `basePath`, leaving every other request of the app untouched.
 */
export function createSessionmux(options: SessionmuxOptions): Promise<Sessionmux> {
  return mountSessionmux(options, { claimAll: false });
}
