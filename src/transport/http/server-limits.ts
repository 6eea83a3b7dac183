import type { Server } from "node:http";

/** Connection limits of the HTTP server (docs/reliability.md "Limits"). */
export interface HttpServerLimits {
  /** @default 256 — requests one keep-alive connection may carry; later pipelined ones get 503. */
  maxRequestsPerSocket: number;
  /** @default 30 000 — ms a client may take to send a request's headers. */
  headersTimeoutMs: number;
  /** @default 120 000 — ms a client may take to send a whole request (an upload included). */
  requestTimeoutMs: number;
  /** @default 5 000 — ms an idle keep-alive connection stays open. */
  keepAliveTimeoutMs: number;
}

export const DEFAULT_HTTP_SERVER_LIMITS: HttpServerLimits = {
  maxRequestsPerSocket: 256,
  headersTimeoutMs: 30_000,
  requestTimeoutMs: 120_000,
  keepAliveTimeoutMs: 5_000,
};

/** Applies Node's own guards against slow or greedy HTTP clients. */
export function applyServerLimits(server: Server, limits: Partial<HttpServerLimits> = {}): void {
  const resolved = { ...DEFAULT_HTTP_SERVER_LIMITS, ...limits };
  server.maxRequestsPerSocket = resolved.maxRequestsPerSocket;
  server.headersTimeout = resolved.headersTimeoutMs;
  server.requestTimeout = resolved.requestTimeoutMs;
  server.keepAliveTimeout = resolved.keepAliveTimeoutMs;
}
