import type { IncomingMessage, ServerResponse } from "node:http";
import { Limits, toSessionmuxError } from "../../../protocol/index.js";
import type { HostApi } from "../../host/host-api.js";
import type { Principal } from "../../host/principal.js";
import { CountsByKey } from "../../store/counts-by-key.js";
import type { Authenticator } from "../auth.js";
import type { FaultLog } from "../fault-log.js";
import type { HostMetrics } from "../metrics.js";
import { attachmentRoutes } from "./attachment-routes.js";
import { BodiesReceiving } from "./bodies-receiving.js";
import { chatRoutes } from "./chat-routes.js";
import { awaitTurn } from "./connection-turns.js";
import { fail, sendError, sendJson } from "./http-reply.js";
import type { Route, UploadLedger, UploadLimits } from "./route-context.js";
import { SessionListCache } from "./session-list-cache.js";
import { sessionRoutes } from "./session-routes.js";
import { TranscriptCache } from "./session-transcript.js";
import { defaultWebRoot, serveConsole } from "./static-console.js";
import { usageRoutes } from "./usage-route.js";

export interface HttpOptions {
  metrics?: HostMetrics;
  /** @default none — unexpected errors (answered 500) are logged here with their route. */
  logger?: FaultLog;
  /**
   * Folder holding the built console (`index.html` and assets), served at `/` without auth.
   * @default "<package root>/dist/web"
   */
  webRoot?: string;
  /** @default 1 MiB (JSON bodies; attachment uploads have their own limit) */
  maxBodyBytes?: number;
  /** @default 10 MiB */
  maxUploadBytes?: number;
  /** @default 64 MiB — a principal's unreferenced uploads, those being received included */
  uploadQuotaBytes?: number;
  /**
   * @default 32 MiB — stored event data a transcript view folds; more is `transcript_too_large`.
   * A mounted host bounds its agents' `turn.history()` and the prefix a `session.fork` copies
   * with it too.
   */
  maxTranscriptBytes?: number;
  /** Counts a principal's unreferenced uploads; without one there is no upload quota. */
  uploadLedger?: UploadLedger;
  /** @default 4 MiB — unsent bytes on a connection above which its next request waits. */
  sendHighWaterBytes?: number;
  /** Answers `/readyz`; without it `/readyz` answers as `/healthz`. */
  readiness?: () => { ready: boolean; checkedAt: number; reason?: string };
}

const ROUTES: readonly Route[] = [...chatRoutes, ...sessionRoutes, ...attachmentRoutes, ...usageRoutes];

/** Whether `pathname` is one of the host's HTTP routes (any method): what it claims on a shared root. */
export function isHostRoute(pathname: string): boolean {
  return (
    pathname === "/healthz" ||
    pathname === "/readyz" ||
    pathname === "/metrics" ||
    ROUTES.some((route) => route.pattern.test(pathname))
  );
}

/** Paths that need a bearer token; everything else is the console, `/healthz` or `/readyz`. */
function isProtected(pathname: string): boolean {
  return pathname === "/metrics" || pathname.startsWith("/api/") || pathname.startsWith("/v1/");
}

/**
 * The HTTP request handler of the host (protocol-v1 §8): `/healthz`, `/metrics`, the read routes
 * and the console. Checks run in the order auth (401) → route (404) → body (400/413) → resource
 * (404/409); a client mistake is never answered with a 5xx.
 */
export function createHttpHandler(
  host: HostApi,
  auth: Authenticator,
  options: Partial<HttpOptions>,
): (req: IncomingMessage, res: ServerResponse) => void {
  const maxBodyBytes = options.maxBodyBytes ?? Limits.maxHttpBodyBytes;
  const webRoot = options.webRoot ?? defaultWebRoot();
  const metrics = options.metrics;
  const transcripts = {
    cache: new TranscriptCache(),
    maxDataBytes: options.maxTranscriptBytes ?? Limits.transcriptViewBytes,
    folding: new BodiesReceiving(),
    sending: new CountsByKey<string>(),
  };
  const sessionLists = new SessionListCache(host);
  const uploads: UploadLimits = {
    maxBytes: options.maxUploadBytes ?? Limits.maxAttachmentBytes,
    quotaBytes: options.uploadQuotaBytes ?? Limits.uploadQuotaBytes,
    ledger: options.uploadLedger,
    receiving: new BodiesReceiving(),
  };
  const highWaterBytes = options.sendHighWaterBytes ?? Limits.sendHighWaterBytes;
  const jsonBodies = new BodiesReceiving();

  async function handle(req: IncomingMessage, res: ServerResponse, label: { route: string }): Promise<void> {
    const url = parseUrl(req.url);
    if (!url) throw fail("bad_request", "unparseable request target");
    const { pathname } = url;
    const method = req.method ?? "GET";
    if (answerProbe(pathname, method, res, label, options.readiness)) return;
    if (!isProtected(pathname)) {
      label.route = "static";
      if ((method === "GET" || method === "HEAD") && serveConsole(req, res, webRoot, pathname)) return;
      throw fail("not_found", "no such route");
    }
    const match = matchRoute(method, pathname);
    label.route = match?.route.name ?? (pathname === "/metrics" ? "GET /metrics" : "unmatched");
    if (pathname === "/metrics" && method === "GET" && metrics) return serveMetrics(req, res, auth, metrics);
    const principal = authenticated(req, res, auth);
    if (!match) throw fail("not_found", "no such route");
    await match.route.handle({
      req,
      res,
      host,
      principal,
      params: match.params,
      query: url.searchParams,
      maxBodyBytes,
      jsonBodies,
      transcripts,
      sessionLists,
      uploads,
    });
  }

  return (req, res) => {
    const label = { route: "unmatched" };
    if (metrics) observeRequest(res, label, metrics);
    awaitTurn(req, res, highWaterBytes)
      .then((turn) => (turn ? handle(req, res, label) : undefined))
      .catch((err: unknown) => {
        const error = toSessionmuxError(err);
        if (error.code === "internal_error")
          options.logger?.error({ err, route: label.route, method: req.method }, "http internal error");
        // The body was not read to its end: close rather than read what was refused.
        if (error.code === "payload_too_large") closeAfterReply(req, res);
        sendError(res, error);
      });
  };
}

/** Liveness (`/healthz`: the process answers) and readiness (`/readyz`: the database took a write lock recently). */
function answerProbe(
  pathname: string,
  method: string,
  res: ServerResponse,
  label: { route: string },
  readiness: HttpOptions["readiness"],
): boolean {
  if (method !== "GET" && method !== "HEAD") return false;
  if (pathname === "/healthz") {
    label.route = "GET /healthz";
    sendJson(res, 200, { ok: true });
    return true;
  }
  if (pathname === "/readyz") {
    label.route = "GET /readyz";
    const state = readiness?.() ?? { ready: true, checkedAt: Date.now() };
    res.setHeader("cache-control", "no-store");
    sendJson(res, state.ready ? 200 : 503, state);
    return true;
  }
  return false;
}

function matchRoute(method: string, pathname: string): { route: Route; params: string[] } | undefined {
  for (const route of ROUTES) {
    if (route.method !== method) continue;
    const m = route.pattern.exec(pathname);
    if (m) return { route, params: m.slice(1) };
  }
  return undefined;
}

/** `/metrics` for an admin or the metrics token. */
async function serveMetrics(
  req: IncomingMessage,
  res: ServerResponse,
  auth: Authenticator,
  metrics: HostMetrics,
): Promise<void> {
  const access = auth.metricsAccess(req);
  if (access === "unauthorized") res.setHeader("www-authenticate", 'Bearer realm="sessionmux"');
  if (access !== "ok")
    throw fail(
      access,
      access === "forbidden" ? "an admin or the metrics token is required" : "bearer token required",
    );
  const text = await metrics.registry.metrics();
  res.writeHead(200, { "content-type": metrics.registry.contentType, "cache-control": "no-store" });
  res.end(text);
}

/** The request's principal, or a 401/403 refusal thrown. */
function authenticated(req: IncomingMessage, res: ServerResponse, auth: Authenticator): Principal {
  const outcome = auth.authenticate(req, { allowSubprotocol: false });
  if (outcome.ok) return outcome.principal;
  if (outcome.status === 401) res.setHeader("www-authenticate", 'Bearer realm="sessionmux"');
  throw fail(
    outcome.code === "forbidden_origin" ? "forbidden_origin" : "unauthorized",
    "bearer token required",
  );
}

/** Counts the request and its duration under its route once the reply is finished. */
function observeRequest(res: ServerResponse, label: { route: string }, metrics: HostMetrics): void {
  const started = performance.now();
  res.once("finish", () => {
    metrics.httpRequests.inc({ route: label.route, status: String(res.statusCode) });
    metrics.httpSeconds.observe({ route: label.route }, (performance.now() - started) / 1000);
  });
}

function parseUrl(target: string | undefined): URL | undefined {
  if (!target?.startsWith("/")) return undefined;
  try {
    return new URL(target, "http://host.invalid");
  } catch {
    return undefined;
  }
}

/**
 * An oversized body is not read to its end: the reply says `Connection: close`. Node's server then
 * ends and destroys the socket itself once the reply is flushed (a peer still sending was seen
 * to get the 413 every time on loopback); the end and the destroy 2 s later here only make sure
 * of it.
 */
function closeAfterReply(req: IncomingMessage, res: ServerResponse): void {
  if (res.headersSent) return;
  res.setHeader("connection", "close");
  res.once("finish", () => {
    req.socket.end();
    setTimeout(() => req.socket.destroy(), 2_000).unref();
  });
}
