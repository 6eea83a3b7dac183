import WebSocket from "ws";
import { Limits, SUBPROTOCOL } from "../../protocol/limits.js";
import { type ClientOptions, createClient, type SessionmuxClient } from "./client.js";
import { MAX_HOST_MESSAGE_BYTES } from "./host-frame-reader.js";
import { clockJumpSignals } from "./network-signals.js";
import type { SocketFactory, WebSocketLike } from "./socket.js";

export * from "./index.js";

/**
 * A socket silent this long is treated as dead (half-open TCP): the host pings every 15 s by
 * default (§2), so three missed pings.
 */
export const DEFAULT_SILENCE_TIMEOUT_MS = 3 * Limits.pingIntervalMs;

/** How long a Node client waits for the host to answer the upgrade. */
export const DEFAULT_HANDSHAKE_TIMEOUT_MS = 10_000;

/** A Node socket factory: `ws` with the token in the `Authorization: Bearer` header (§2). */
export function createNodeSocketFactory(
  options: {
    /** Drop a socket that heard nothing (no ping, no frame) this long. @default 45_000 */
    silenceTimeoutMs?: number;
    /** Give up an upgrade the host does not answer within this long. @default 10_000 */
    handshakeTimeoutMs?: number;
    /**
     * The connection to upgrade (a `stream.Duplex`), instead of a TCP connection to the URL's host:
     * in-process callers. Typed loosely so the client's types need no Node declarations.
     */
    createConnection?: () => unknown;
  } = {},
): SocketFactory {
  const silenceMs = options.silenceTimeoutMs ?? DEFAULT_SILENCE_TIMEOUT_MS;
  const handshakeTimeout = options.handshakeTimeoutMs ?? DEFAULT_HANDSHAKE_TIMEOUT_MS;
  return (url, token) => {
    const socket = new WebSocket(url, [SUBPROTOCOL], {
      headers: { Authorization: `Bearer ${token}` },
      perMessageDeflate: false,
      maxPayload: MAX_HOST_MESSAGE_BYTES,
      handshakeTimeout,
      ...(options.createConnection ? { createConnection: options.createConnection as never } : {}),
    });
    const like = socket as unknown as WebSocketLike;
    let refusedWith: number | undefined;
    like.upgradeStatus = () => Promise.resolve(refusedWith);
    socket.on("unexpected-response", (request, response) => {
      refusedWith = response.statusCode;
      // Without a listener ws would abort for us; with one we must, or the socket hangs.
      request.destroy();
      response.destroy();
      socket.terminate();
    });
    let watchdog: ReturnType<typeof setTimeout> | undefined;
    const heard = () => {
      clearTimeout(watchdog);
      watchdog = setTimeout(() => socket.terminate(), silenceMs);
    };
    socket.on("open", heard).on("ping", heard).on("message", heard).on("pong", heard);
    socket.on("error", (error: Error & { code?: string }) => {
      like.failureCode = error.code;
    });
    like.keepAlivePing = () => {
      if (socket.readyState === WebSocket.OPEN) socket.ping();
    };
    socket.on("ping", () => like.onheartbeat?.()).on("pong", () => like.onheartbeat?.());
    socket.on("close", () => clearTimeout(watchdog));
    return like;
  };
}

/** The default Node socket factory (see `createNodeSocketFactory`). */
export const nodeSocketFactory: SocketFactory = createNodeSocketFactory();

/**
 * `createClient` for Node: uses `ws` with the Authorization header unless a factory is given, and
 * hears a machine's sleep as a network hint (`clockJumpSignals`) unless `network` says otherwise.
 */
export function createNodeClient(options: Omit<ClientOptions, "WebSocket">): SessionmuxClient {
  return createClient({
    socketFactory: nodeSocketFactory,
    ...options,
    network: options.network ?? clockJumpSignals(),
  });
}
