import { once } from "node:events";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { Logger } from "pino";
import type { AgentDriver } from "./agents/agent.js";
import type { AuthenticateRequest } from "./embed/app-authentication.js";
import { mountSessionmux } from "./embed/mount-sessionmux.js";
import type { SessionHost } from "./host/session-host.js";
import type { HostDatabaseStore } from "./operations/host-database.js";
import { StartupError } from "./operations/startup-error.js";
import type { CallInboxLimits } from "./store/call-inbox-limits.js";
import type { HostStore } from "./store/live-state-store.js";
import type { TokenSpec } from "./transport/auth.js";
import type { HttpOptions } from "./transport/http/router.js";
import { applyServerLimits, type HttpServerLimits } from "./transport/http/server-limits.js";
import type { HostMetrics } from "./transport/metrics.js";
import type { MuxOptionsInput } from "./transport/mux/mux-server.js";
import type { PrincipalLimitOptions } from "./transport/principal-limits.js";

export interface HostOptions {
  /** @default "127.0.0.1" */
  host?: string;
  /** @default 8787; 0 picks a free port */
  port?: number;
  /** A SQLite file, or a `postgres://` URL (see `SessionmuxOptions.db`). */
  dbPath: string;
  /** PostgreSQL only. @default "public" */
  dbSchema?: string;
  /** PostgreSQL only. @default 10 */
  dbPoolSize?: number;
  /** PostgreSQL only (see `SessionmuxOptions.dbListenCheckMs`). @default 5000 */
  dbListenCheckMs?: number;
  /** PostgreSQL only (see `SessionmuxOptions.dbQueryCheckMs`). @default 5000 */
  dbQueryCheckMs?: number;
  /** @default generated (see `SessionmuxOptions.hostId`) */
  hostId?: string;
  /** @default 10_000 */
  leaseTtlMs?: number;
  /** @default false — a missing database folder is refused */
  createDbFolder?: boolean;
  tokens: TokenSpec[];
  /** Replaces `tokens` (see `SessionmuxOptions.authenticate`). */
  authenticate?: AuthenticateRequest;
  /** @default new DemoAgent() */
  agent?: AgentDriver;
  /** @default 600_000 (10 minutes) */
  idleDetachMs?: number;
  /** @default 64 MiB (see `SessionmuxOptions.maxTurnAttachmentBytes`) */
  maxTurnAttachmentBytes?: number;
  allowedOrigins?: string[];
  logger?: Logger;
  mux?: MuxOptionsInput;
  http?: Partial<HttpOptions>;
  /** @default false */
  processMetrics?: boolean;
  /** Node's guards against slow or greedy HTTP clients on the host's own server. */
  httpServer?: Partial<HttpServerLimits>;
  /** A token that reads `/metrics` only (admin tokens read it too). */
  metricsToken?: string;
  principals?: Partial<PrincipalLimitOptions>;
  /** @default 1 hour — uploads no prompt references by then are deleted. */
  uploadTtlMs?: number;
  /** PostgreSQL only (see `SessionmuxOptions.callInbox`). */
  callInbox?: Partial<CallInboxLimits>;
  /** Tests only: how the host sees the store (see `mountSessionmux`). @default the store itself */
  storeView?: (store: HostStore) => HostStore;
}

export interface RunningHost {
  readonly port: number;
  /** `http://host:port` */
  readonly url: string;
  /** `ws://host:port/api/remote.mux` */
  readonly wsUrl: string;
  readonly host: SessionHost;
  readonly store: HostDatabaseStore;
  readonly hostId: string;
  readonly metrics: HostMetrics;
  readonly server: Server;
  close(): Promise<void>;
}

/** A host on a server of its own: `createSessionmux` answering every path, plus `listen`. */
export async function startHost(options: HostOptions): Promise<RunningHost> {
  const mounted = await mountSessionmux(
    {
      db: options.dbPath,
      createDbFolder: options.createDbFolder ?? false,
      ...(options.dbSchema !== undefined ? { dbSchema: options.dbSchema } : {}),
      ...(options.dbPoolSize !== undefined ? { dbPoolSize: options.dbPoolSize } : {}),
      ...(options.dbListenCheckMs !== undefined ? { dbListenCheckMs: options.dbListenCheckMs } : {}),
      ...(options.dbQueryCheckMs !== undefined ? { dbQueryCheckMs: options.dbQueryCheckMs } : {}),
      ...(options.hostId !== undefined ? { hostId: options.hostId } : {}),
      ...(options.leaseTtlMs !== undefined ? { leaseTtlMs: options.leaseTtlMs } : {}),
      tokens: options.tokens,
      ...(options.authenticate ? { authenticate: options.authenticate } : {}),
      cors: options.allowedOrigins ?? [],
      processMetrics: options.processMetrics ?? false,
      ...(options.agent ? { agent: options.agent } : {}),
      ...(options.idleDetachMs !== undefined ? { idleDetachMs: options.idleDetachMs } : {}),
      ...(options.maxTurnAttachmentBytes !== undefined
        ? { maxTurnAttachmentBytes: options.maxTurnAttachmentBytes }
        : {}),
      ...(options.logger ? { logger: options.logger } : {}),
      ...(options.mux ? { mux: options.mux } : {}),
      ...(options.http ? { http: options.http } : {}),
      ...(options.metricsToken !== undefined ? { metricsToken: options.metricsToken } : {}),
      ...(options.principals ? { principals: options.principals } : {}),
      ...(options.uploadTtlMs !== undefined ? { uploadTtlMs: options.uploadTtlMs } : {}),
      ...(options.callInbox ? { callInbox: options.callInbox } : {}),
    },
    { claimAll: true, ...(options.storeView ? { storeView: options.storeView } : {}) },
  );
  const server = createServer();
  applyServerLimits(server, options.httpServer);
  mounted.attach(server);
  const hostname = options.host ?? "127.0.0.1";
  const port = options.port ?? 8787;
  try {
    await listen(server, hostname, port);
  } catch (err) {
    await mounted.close();
    throw err;
  }
  const { port: bound } = server.address() as AddressInfo;
  const authority = `${hostname.includes(":") ? `[${hostname}]` : hostname}:${bound}`;
  let closing: Promise<void> | undefined;
  return {
    port: bound,
    url: `http://${authority}`,
    wsUrl: `ws://${authority}/api/remote.mux`,
    host: mounted.host,
    store: mounted.store,
    hostId: mounted.hostId,
    metrics: mounted.metrics,
    server,
    close() {
      closing ??= (async () => {
        try {
          await mounted.close();
        } finally {
          // the port is released even when a part of the host failed to close
          server.closeAllConnections();
          await new Promise<void>((resolve) => server.close(() => resolve()));
        }
      })();
      return closing;
    },
  };
}

async function listen(server: Server, host: string, port: number): Promise<void> {
  // A reconnect storm (every tab of a restarted host at once) overflows Node's default backlog of 511.
  server.listen({ port, host, backlog: 4096 });
  try {
    await once(server, "listening");
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "EADDRINUSE") {
      throw new StartupError(
        "address_in_use",
        `port ${port} on ${host} is already in use; stop the other process or pick another --port`,
        { cause: err },
      );
    }
    if (code === "EADDRNOTAVAIL" || code === "EACCES") {
      throw new StartupError(
        "listen_failed",
        `cannot listen on ${host}:${port} (${code}); check --host and --port`,
        { cause: err },
      );
    }
    throw err;
  }
}
