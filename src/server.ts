import { once } from "node:events";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { type Logger, pino } from "pino";
import { Limits } from "../protocol/index.js";
import type { AgentDriver } from "./agents/agent.js";
import { DemoAgent } from "./agents/demo-agent.js";
import { SessionHost } from "./host/session-host.js";
import { SqliteSessionStore } from "./store/sqlite-store.js";
import { Authenticator, type TokenSpec } from "./transport/auth.js";
import { createHttpHandler, type HttpOptions } from "./transport/http/router.js";
import { applyServerLimits, type HttpServerLimits } from "./transport/http/server-limits.js";
import { HostMetrics } from "./transport/metrics.js";
import { attachMux, type MuxOptions } from "./transport/mux/mux-server.js";
import { type PrincipalLimitOptions, PrincipalLimits } from "./transport/principal-limits.js";

export interface HostOptions {
  /** @default "127.0.0.1" */
  host?: string;
  /** @default 8787; 0 picks a free port */
  port?: number;
  dbPath: string;
  tokens: TokenSpec[];
  /** @default new DemoAgent() */
  agent?: AgentDriver;
  /** @default 600_000 (10 minutes) */
  idleDetachMs?: number;
  allowedOrigins?: string[];
  logger?: Logger;
  mux?: Partial<MuxOptions>;
  http?: Partial<HttpOptions>;
  httpServer?: Partial<HttpServerLimits>;
  /** A token that reads `/metrics` only (admin tokens read it too). */
  metricsToken?: string;
  principals?: Partial<PrincipalLimitOptions>;
  /** @default 1 hour — uploads no prompt references by then are deleted. */
  uploadTtlMs?: number;
}

export interface RunningHost {
  readonly port: number;
  /** `http://host:port` */
  readonly url: string;
  /** `ws://host:port/api/remote.mux` */
  readonly wsUrl: string;
  readonly host: SessionHost;
  readonly store: SqliteSessionStore;
  readonly metrics: HostMetrics;
  readonly server: Server;
  close(): Promise<void>;
}

/** The composition root: store → host → HTTP server with the mux and the read routes. */
export async function startHost(options: HostOptions): Promise<RunningHost> {
  // Checked first: a bad token configuration refuses to start before the store is touched.
  const auth = new Authenticator(options.tokens, {
    allowedOrigins: options.allowedOrigins ?? [],
    ...(options.metricsToken === undefined ? {} : { metricsToken: options.metricsToken }),
  });
  // One logger for every layer; without one, nothing is logged anywhere.
  const logger = options.logger ?? pino({ enabled: false });
  const metrics = new HostMetrics({ defaultMetrics: true });
  const store = SqliteSessionStore.open(options.dbPath, { metrics, logger });
  const host = new SessionHost({
    store,
    agent: options.agent ?? new DemoAgent(),
    idleDetachMs: options.idleDetachMs ?? 600_000,
    metrics,
    logger,
  });
  await host.start();
  const uploads = store.attachmentSweeper();
  const uploadTtlMs = options.uploadTtlMs ?? Limits.uploadTtlMs;
  uploads.start(uploadTtlMs, Math.min(Math.max(uploadTtlMs / 4, 1_000), 60_000), (err) =>
    logger.error({ err }, "upload sweep failed"),
  );
  const server = createServer(
    createHttpHandler(host, auth, { metrics, logger, uploadLedger: uploads, ...options.http }),
  );
  applyServerLimits(server, options.httpServer);
  const mux = attachMux(server, host, auth, {
    metrics,
    principalLimits: new PrincipalLimits(options.principals),
    logger,
    ...options.mux,
  });
  // A reconnect storm (every tab of a restarted host at once) overflows Node's default backlog of 511.
  server.listen({ port: options.port ?? 8787, host: options.host ?? "127.0.0.1", backlog: 4096 });
  await once(server, "listening");
  const { port } = server.address() as AddressInfo;
  const hostname = options.host ?? "127.0.0.1";
  const authority = `${hostname.includes(":") ? `[${hostname}]` : hostname}:${port}`;
  let closing: Promise<void> | undefined;
  return {
    port,
    url: `http://${authority}`,
    wsUrl: `ws://${authority}/api/remote.mux`,
    host,
    store,
    metrics,
    server,
    close() {
      closing ??= (async () => {
        await mux.close();
        await host.shutdown();
        server.closeAllConnections();
        await new Promise<void>((resolve) => server.close(() => resolve()));
        uploads.stop();
        await store.close();
      })();
      return closing;
    },
  };
}
