import type { IncomingMessage } from "node:http";
import type { Socket } from "node:net";
import type { Duplex } from "node:stream";
import { type WebSocket, WebSocketServer } from "ws";
import { SUBPROTOCOL } from "../../../protocol/index.js";
import type { HostApi } from "../../host/host-api.js";
import type { Principal } from "../../host/principal.js";
import type { Authenticator } from "../auth.js";
import type { HostMetrics } from "../metrics.js";
import { MuxConnection } from "./mux-connection.js";
import { type MuxOptions, type MuxOptionsInput, resolveMuxOptions } from "./mux-options.js";
import { judgeUpgrade, refuseUpgrade } from "./upgrade-gate.js";

export type { MuxLogger, MuxOptions, MuxOptionsInput } from "./mux-options.js";

export interface MuxHandle {
  /**
   * Ends every stream with `host_shutting_down`, refuses every call sent from then on, waits (up
   * to 10 s) for the calls in flight to be answered, closes every socket, stops accepting.
   */
  close(): Promise<void>;
  readonly connections: number;
}

/** Grace period for close handshakes (at shutdown, of a refused socket) before sockets are cut. */
const CLOSE_GRACE_MS = 1000;
/**
 * How long a closing mux waits for its sockets' calls in flight to be answered before it closes
 * them: longer than a host's shutdown takes to stop its turns (`turnStopGraceMs`, 5 s) and then
 * answer the calls it forwarded to other hosts.
 */
const CALLS_ANSWERED_MS = 10_000;

/** 4000 + the HTTP status the refusal would have had (§2). */
const TOO_MANY_CONNECTIONS_CLOSE = 4429;

/** The mux without a server of its own: the caller hands it upgrade requests for the mux path. */
export interface MuxUpgradeHandler extends MuxHandle {
  /**
   * Takes the socket: refused on the raw socket, upgraded to a mux connection, or (past its
   * principal's sockets) upgraded and closed at once.
   */
  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void;
  /**
   * The same, for a caller whose principal is already known (an in-process connection): every
   * rule after authentication applies, the per-principal socket limit first.
   */
  admit(principal: Principal, req: IncomingMessage, socket: Duplex, head: Buffer): void;
}

/**
 * The mux's upgrade handling (protocol-v1 §2). Upgrade requests are judged on the raw socket: a
 * refusal is a plain HTTP answer and no WebSocket ever exists, but for a principal past its
 * sockets, told by a close code a browser can read (`turnAway`).
 */
export function createMuxUpgradeHandler(
  host: HostApi,
  auth: Authenticator,
  options: MuxOptionsInput & { metrics?: HostMetrics },
): MuxUpgradeHandler {
  const resolved = resolveMuxOptions(options);
  const wss = muxSocketServer(resolved.maxPayloadBytes);
  const live = new Map<WebSocket, MuxConnection>();
  let closing = false;

  const admit = (principal: Principal, req: IncomingMessage, socket: Duplex, head: Buffer) => {
    if (closing)
      return refuseUpgrade(socket, { ok: false, status: 404, code: "not_found", message: "shutting down" });
    if (!claimSocket(principal, socket, resolved)) {
      const limit = resolved.principalLimits.options.maxSocketsPerPrincipal;
      return turnAway(wss, req, socket, head, `at most ${limit} sockets per principal; close one first`);
    }
    // The 101 answer `ws` writes and the hello (with whatever else the connection sends in this
    // tick) leave in one write: a reconnecting crowd costs one write per socket, not two.
    socket.cork();
    process.nextTick(() => socket.uncork());
    wss.handleUpgrade(req, socket, head, (ws) => {
      // A TCP socket, or an in-process one that offers the same counters (see MemorySocket).
      const connection = new MuxConnection(ws, socket as Socket, host, principal, resolved);
      live.set(ws, connection);
      resolved.metrics?.connections.inc();
      ws.once("close", () => {
        connection.dispose();
        live.delete(ws);
        resolved.metrics?.connections.dec();
      });
      connection.start();
    });
  };
  // Judged after the event loop's next poll: a tick that fires late, behind a stall of the host's
  // own, would otherwise find unread the pongs that came in meanwhile, and drop every peer.
  const tickAll = () => {
    if (closing) return;
    for (const connection of live.values()) connection.heartbeat();
  };
  const heartbeat = setInterval(() => setImmediate(tickAll), resolved.pingIntervalMs);
  heartbeat.unref();

  let closed: Promise<void> | undefined;
  const closeAll = async () => {
    closing = true;
    clearInterval(heartbeat);
    await Promise.all([...live].map(([ws, connection]) => shutDown(ws, connection)));
    await new Promise<void>((resolve) => wss.close(() => resolve()));
  };

  const handleUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    socket.on("error", () => socket.destroy());
    const verdict = judgeUpgrade(req, auth);
    if (!verdict.ok) return refuseUpgrade(socket, verdict);
    admit(verdict.principal, req, socket, head);
  };

  return {
    handleUpgrade,
    admit(principal, req, socket, head) {
      socket.on("error", () => socket.destroy());
      admit(principal, req, socket, head);
    },
    get connections() {
      return live.size;
    },
    close() {
      // a second caller waits for the same shutdown, not merely for its start
      closed ??= closeAll();
      return closed;
    },
  };
}

/** A `ws` server that only upgrades the sockets handed to it; the mux tracks its connections itself. */
function muxSocketServer(maxPayload: number): WebSocketServer {
  return new WebSocketServer({
    noServer: true,
    clientTracking: false,
    perMessageDeflate: false,
    maxPayload,
    // The `bearer.` entry, if offered, stays out of the answer: the host answers sessionmux.v1 only.
    handleProtocols: () => SUBPROTOCOL,
  });
}

/**
 * Whether the principal may hold one more socket; if so its slot is taken, and released when the
 * socket closes.
 */
function claimSocket(
  principal: Principal,
  socket: Duplex,
  options: Pick<MuxOptions, "principalLimits"> & { metrics?: HostMetrics },
): boolean {
  const releaseSocket = options.principalLimits.acquireSocket(principal);
  if (!releaseSocket) {
    options.metrics?.refused("too_many_connections");
    return false;
  }
  socket.once("close", releaseSocket);
  return true;
}

/**
 * Refuses a socket past its principal's limit (§2) by upgrading it and closing it at once with
 * 4429, the reason the body an HTTP 429 would carry: a browser hides the status of a refused
 * upgrade, so a 429 would look to it like a host that is down, and nobody could tell the person
 * why. The socket holds no slot and gets no `hello`; one whose peer does not answer the close is
 * cut after the grace period, so refused sockets cannot pile up.
 */
function turnAway(
  wss: WebSocketServer,
  req: IncomingMessage,
  socket: Duplex,
  head: Buffer,
  message: string,
): void {
  wss.handleUpgrade(req, socket, head, (ws) => {
    const cut = setTimeout(() => ws.terminate(), CLOSE_GRACE_MS);
    cut.unref();
    ws.once("close", () => clearTimeout(cut));
    // a close reason holds at most 123 bytes: a limit of 16 digits leaves this one at 108
    ws.close(TOO_MANY_CONNECTIONS_CLOSE, JSON.stringify({ error: "too_many_connections", message }));
  });
}

/**
 * Ends the connection's streams, waits for its calls in flight to be answered (at most
 * `CALLS_ANSWERED_MS`), then closes its socket, cut after a grace period.
 */
function shutDown(ws: WebSocket, connection: MuxConnection): Promise<void> {
  return new Promise<void>((resolve) => {
    if (ws.readyState === ws.CLOSED) return resolve();
    ws.once("close", () => resolve());
    connection.shutDown();
    void connection.callsAnswered(CALLS_ANSWERED_MS).then(() => {
      ws.close(1001, "host shutting down");
      setTimeout(() => ws.terminate(), CLOSE_GRACE_MS).unref();
    });
  });
}
