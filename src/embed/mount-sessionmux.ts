import type { IncomingMessage, ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import cors from "cors";
import { Limits } from "../../protocol/index.js";
import { DemoAgent } from "../agents/demo-agent.js";
import { SessionHost } from "../host/session-host.js";
import { meteredAgent } from "../host/turn-meters.js";
import { type HostDatabaseStore, openHostDatabase } from "../operations/host-database.js";
import { hostIdOf } from "../operations/host-id.js";
import { ReadinessProbe } from "../operations/readiness-probe.js";
import type { HostStore } from "../store/live-state-store.js";
import { Authenticator } from "../transport/auth.js";
import { sendError } from "../transport/http/http-reply.js";
import { createHttpHandler } from "../transport/http/router.js";
import { InProcessConnector } from "../transport/in-process/in-process-connector.js";
import { HostMetrics } from "../transport/metrics.js";
import { createMuxUpgradeHandler } from "../transport/mux/mux-server.js";
import { refuseUpgrade } from "../transport/mux/upgrade-gate.js";
import { PrincipalLimits } from "../transport/principal-limits.js";
import { AppAuthentication } from "./app-authentication.js";
import { BasePath } from "./base-path.js";
import type { RequestHandler, Sessionmux, SessionmuxOptions, UpgradeHandler } from "./create-sessionmux.js";
import { defaultLogger } from "./default-logger.js";
import { meteredCalls } from "./metered-calls.js";
import { checkOptions } from "./option-checks.js";
import { RefusalLog } from "./refusal-log.js";

/** What the CLI and `startHost` see: the concrete parts. */
export interface MountedSessionmux extends Sessionmux {
  readonly host: SessionHost;
  readonly store: HostDatabaseStore;
}

/** `claimAll`: the server is sessionmux's alone, so it answers every path (the console at `/`). */
export async function mountSessionmux(
  options: SessionmuxOptions,
  mode: {
    claimAll: boolean;
    /**
     * How the host sees the store: tests put an asynchronous double in between, so the paths a
     * networked store takes (reads interleaved with commits) run against the embedded one.
     * @default the store itself
     */
    storeView?: (store: HostStore) => HostStore;
  },
): Promise<MountedSessionmux> {
  checkOptions(options);
  const base = new BasePath(options.basePath, mode.claimAll);
  const logger = options.logger ?? defaultLogger();
  const hostId = hostIdOf(options.hostId, "hostId");
  // every line names its host, as the session host's own do (it binds the id itself): the hosts
  // sharing a database write to one log collector, where a line without it is nobody's
  const hostLogger = logger.child({ hostId });
  const refusals = new RefusalLog(hostLogger);
  const appAuth = options.authenticate
    ? new AppAuthentication(options.authenticate, refusals, options.authenticateLimits)
    : undefined;
  const metrics = new HostMetrics({ defaultMetrics: options.processMetrics ?? true });
  const auth = new Authenticator(options.tokens ?? [], {
    allowedOrigins: options.cors ?? [],
    ...(appAuth ? { resolve: appAuth.resolve } : {}),
    onRefused: (req, code) => {
      metrics.refused(code);
      refusals.refused(req, code);
    },
    ...(options.metricsToken !== undefined ? { metricsToken: options.metricsToken } : {}),
  });
  metrics.hostInfo(hostId);
  const database = await openHostDatabase({
    db: options.db,
    ...(options.dbSchema !== undefined ? { schema: options.dbSchema } : {}),
    ...(options.dbPoolSize !== undefined ? { poolSize: options.dbPoolSize } : {}),
    ...(options.callInbox ? { callInbox: options.callInbox } : {}),
    ...(options.dbListenCheckMs !== undefined ? { listenCheckMs: options.dbListenCheckMs } : {}),
    ...(options.dbQueryCheckMs !== undefined ? { queryCheckMs: options.dbQueryCheckMs } : {}),
    createFolder: options.createDbFolder ?? false,
    hostId,
    metrics,
    // the app's logger only: without one a throwing commit listener surfaces as a process
    // warning, which a test turns into its failure
    ...(options.logger ? { logger: options.logger.child({ hostId }) } : {}),
  });
  const store = database.store;
  if (database.pools) metrics.databasePools(database.pools);
  const host = new SessionHost({
    store: mode.storeView?.(store) ?? store,
    agent: meteredAgent(options.agent ?? new DemoAgent(), metrics, hostLogger),
    idleDetachMs: options.idleDetachMs ?? 600_000,
    ...(options.turnStopGraceMs !== undefined ? { turnStopGraceMs: options.turnStopGraceMs } : {}),
    ...(options.maxTurnAttachmentBytes !== undefined
      ? { maxTurnAttachmentBytes: options.maxTurnAttachmentBytes }
      : {}),
    hostId,
    ...(options.principals?.maxSessionsPerPrincipal !== undefined
      ? { maxSessionsPerPrincipal: options.principals.maxSessionsPerPrincipal }
      : {}),
    ...(options.principals?.maxStoredBytesPerPrincipal !== undefined
      ? { maxStoredBytesPerPrincipal: options.principals.maxStoredBytesPerPrincipal }
      : {}),
    // one bound for every read of a whole log: the HTTP views and an agent's history
    ...(options.http?.maxTranscriptBytes !== undefined
      ? { maxTranscriptBytes: options.http.maxTranscriptBytes }
      : {}),
    ...(database.shared
      ? {
          cluster: {
            ...database.shared,
            ...(options.leaseTtlMs !== undefined ? { leaseTtlMs: options.leaseTtlMs } : {}),
          },
        }
      : {}),
    metrics,
    logger,
  });
  metrics.liveState(() => host.liveCounts());
  const readiness = new ReadinessProbe(
    () => database.ready(),
    options.readinessIntervalMs ?? 5000,
    Date.now,
    hostLogger,
  );
  try {
    await host.start();
    await readiness.start();
  } catch (err) {
    readiness.stop();
    await database.close();
    throw err;
  }
  const uploads = database.uploads;
  const uploadTtlMs = options.uploadTtlMs ?? Limits.uploadTtlMs;
  uploads.start(uploadTtlMs, Math.min(Math.max(uploadTtlMs / 4, 1_000), 60_000), (err) =>
    hostLogger.error({ err }, "upload sweep failed"),
  );
  const http = createHttpHandler(host, auth, {
    ...options.http,
    metrics,
    logger: hostLogger,
    uploadLedger: uploads,
    readiness: () => readiness.current(),
  });
  const mux = createMuxUpgradeHandler(meteredCalls(host, metrics.callSeconds), auth, {
    ...options.mux,
    principalLimits: new PrincipalLimits(options.principals),
    metrics,
    logger: hostLogger,
  });
  const inProcess = new InProcessConnector(mux, `${base.prefix}/api/remote.mux`);
  const corsMiddleware =
    options.cors && options.cors.length > 0
      ? cors({
          // a browser's Origin is lower case, and the Origin check compares it so: a configured
          // `https://App.Example` passed that check while these headers, compared as given, were left out
          origin: options.cors.map((origin) => origin.toLowerCase()),
          methods: ["GET", "HEAD", "POST", "PUT", "DELETE"],
          allowedHeaders: ["authorization", "content-type"],
          maxAge: 600,
        })
      : undefined;

  const handler: RequestHandler = (req, res, next) => {
    const withSlash = base.slashRedirect(req.url);
    if (withSlash !== undefined && (req.method === "GET" || req.method === "HEAD")) {
      res.writeHead(308, { location: withSlash }).end();
      return;
    }
    const inner = base.claim(req.url);
    if (inner === undefined) {
      if (next) return next();
      return notFound(res);
    }
    keepOriginalUrl(req);
    req.url = inner;
    const answer = (reply: () => void) => {
      if (corsMiddleware) corsMiddleware(req, res, reply);
      else reply();
    };
    if (!appAuth) return answer(() => http(req, res));
    void appAuth.settle(req).then((refusal) => {
      if (refusal) {
        metrics.refused(refusal.code);
        answer(() => sendError(res, refusal));
      } else answer(() => http(req, res));
    });
  };
  const upgrade: UpgradeHandler = (req, socket, head) => {
    const inner = base.claimUpgrade(req.url);
    if (inner === undefined) return false;
    keepOriginalUrl(req);
    req.url = inner;
    if (!appAuth) {
      mux.handleUpgrade(req, socket, head);
      return true;
    }
    socket.on("error", () => socket.destroy());
    void appAuth.settle(req).then((refusal) => {
      if (socket.destroyed) return;
      if (refusal) {
        metrics.refused(refusal.code);
        refuseUpgrade(socket, { ok: false, status: 503, code: refusal.code, message: refusal.message });
      } else mux.handleUpgrade(req, socket, head);
    });
    return true;
  };

  let closing: Promise<void> | undefined;
  return {
    basePath: base.prefix,
    muxPath: `${base.prefix}/api/remote.mux`,
    handler,
    upgrade,
    host,
    store,
    metrics,
    connect: (principal, clientOptions) => inProcess.connect(principal, clientOptions),
    hostId,
    attach(server) {
      const appListeners = server.listeners("request") as ((
        req: IncomingMessage,
        res: ServerResponse,
      ) => void)[];
      server.removeAllListeners("request");
      const onRequest = (req: IncomingMessage, res: ServerResponse) =>
        handler(req, res, () => {
          if (appListeners.length === 0) notFound(res);
          for (const listener of appListeners) listener.call(server, req, res);
        });
      const onUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer) => {
        if (upgrade(req, socket, head) || server.listenerCount("upgrade") > 1) return;
        refuseUpgrade(socket, { ok: false, status: 404, code: "not_found", message: "no such route" });
      };
      server.on("request", onRequest);
      server.on("upgrade", onUpgrade);
      return () => {
        server.off("request", onRequest);
        server.off("upgrade", onUpgrade);
        for (const listener of appListeners) server.on("request", listener);
      };
    },
    close() {
      closing ??= (async () => {
        readiness.stop();
        // Every step runs though one before it failed (an app's agent whose close throws): a
        // database left open stays locked, and this process could not open it again.
        let failure: { err: unknown } | undefined;
        const step = async (part: string, run: () => unknown) => {
          try {
            await run();
          } catch (err) {
            failure ??= { err };
            hostLogger.error({ err, part }, "shutdown step failed");
          }
        };
        await step("in-process clients", () => inProcess.close());
        // the sockets stay open while the host shuts down: a call in flight (one forwarded to the
        // session's owner, above all) is answered on its socket before it closes
        const muxClosed = step("mux", () => mux.close());
        await step("host", () => host.shutdown());
        await step("call inbox", () => database.shared?.inbox.close?.());
        await muxClosed;
        uploads.stop();
        await step("database", () => database.close());
        if (failure) throw failure.err;
        hostLogger.info({ db: database.description }, "shutdown complete");
      })();
      return closing;
    },
  };
}

function notFound(res: ServerResponse): void {
  res.writeHead(404, { "content-type": "application/json" }).end('{"error":"not_found"}');
}

/**
 * The URL as the client sent it, base path included, where Express keeps it: a log line naming
 * the path below the base path alone would point an operator at a route the app never served.
 */
function keepOriginalUrl(req: IncomingMessage & { originalUrl?: string }): void {
  req.originalUrl ??= req.url;
}
