import { BEARER_SUBPROTOCOL_PREFIX, SUBPROTOCOL } from "../../protocol/subprotocol.js";

/**
 * The part of the WebSocket API the client uses: the browser's `WebSocket` and `ws` both fit.
 * Factories may set `authRejected` when the host refused the upgrade with 401/403, so the client
 * stops retrying a token that can never work.
 */
export interface WebSocketLike {
  binaryType: string;
  readonly readyState: number;
  onopen: ((event: unknown) => void) | null;
  onmessage: ((event: { data: unknown }) => void) | null;
  onclose: ((event: { code: number; reason: string }) => void) | null;
  onerror: ((event: unknown) => void) | null;
  send(data: Uint8Array): void;
  close(code?: number, reason?: string): void;
  /** `ws` only: drop the socket without a closing handshake. */
  terminate?(): void;
  /** Set by a factory that saw the upgrade refused with 401/403 (kept for custom factories). */
  authRejected?: 401 | 403;
  /**
   * For a socket that closed without upgrading: the HTTP status the host answered, if the factory
   * can learn it (`ws` sees it; a browser asks the host over HTTP). `signal` gives up the asking
   * (the client closed): it then rejects or answers undefined.
   */
  upgradeStatus?(signal?: AbortSignal): Promise<number | undefined>;
  /** Set by a factory that saw the socket fail, e.g. `ECONNREFUSED` when nothing listens. */
  failureCode?: string;
  /** Sends a WebSocket ping, where the factory can (`ws`; browsers cannot). */
  keepAlivePing?(): void;
  /** Set by the client; a factory that sees pings or pongs calls it (they prove the path works). */
  onheartbeat?: (() => void) | null;
}

/** WebSocket `readyState` of an open socket (the same in browsers and `ws`). */
const OPEN = 1;

/**
 * Sends only on an open socket: a frame for a closing one is lost anyway (its close event fails
 * whatever waits on it), and browsers log an error for each such send.
 */
export function sendIfOpen(socket: WebSocketLike, data: Uint8Array): void {
  if (socket.readyState !== OPEN) return;
  try {
    socket.send(data);
  } catch {
    // closing between the check and the send: its close event follows
  }
}

/** A browser-style WebSocket constructor (the global `WebSocket`, or `ws`'s class). */
export type WebSocketConstructor = new (url: string, protocols?: string | string[]) => unknown;

/** Opens one physical socket to `url` authenticated with `token`. */
export type SocketFactory = (url: string, token: string) => WebSocketLike;

/** base64url without padding, using only APIs present in browsers and Node ≥ 16. */
export function base64Url(text: string): string {
  let binary = "";
  for (const byte of new TextEncoder().encode(text)) binary += String.fromCharCode(byte);
  return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

/** The subprotocol list a browser sends: `sessionmux.v1` plus the `bearer.` entry carrying the token (§2). */
export function browserSubprotocols(token: string): string[] {
  return [SUBPROTOCOL, `${BEARER_SUBPROTOCOL_PREFIX}${base64Url(token)}`];
}

/** How long a browser waits for the HTTP question that explains a refused upgrade. */
const PROBE_TIMEOUT_MS = 5_000;

/**
 * A factory for browsers, which cannot set headers: the token rides as a subprotocol entry. A
 * browser hides the HTTP status of a refused upgrade, so when a socket fails before upgrading the
 * client asks the host over HTTP with the same token (auth is checked before the route, §8): a
 * 401/403 answer means the token was refused. Cross-origin hosts without CORS leave it unknown,
 * and the client keeps retrying as for a host that is down.
 */
export function browserSocketFactory(WebSocketClass: WebSocketConstructor): SocketFactory {
  return (url, token) => {
    const socket = new WebSocketClass(url, browserSubprotocols(token)) as WebSocketLike;
    socket.upgradeStatus = (signal) => askRefusal(url, token, signal);
    return socket;
  };
}

async function askRefusal(url: string, token: string, signal?: AbortSignal): Promise<number | undefined> {
  if (typeof fetch !== "function") return undefined;
  // Ended by its own limit or by the caller's close(), whichever comes first; its timer is cleared
  // either way, so a closed client keeps no handle.
  const asking = new AbortController();
  const giveUp = () => asking.abort(signal?.reason);
  if (signal?.aborted) giveUp();
  signal?.addEventListener("abort", giveUp, { once: true });
  const limit = setTimeout(() => asking.abort(), PROBE_TIMEOUT_MS);
  try {
    const response = await fetch(url.replace(/^ws/, "http"), {
      headers: { Authorization: `Bearer ${token}` },
      signal: asking.signal,
    });
    await response.body?.cancel();
    return response.status === 401 || response.status === 403 ? response.status : undefined;
  } finally {
    clearTimeout(limit);
    signal?.removeEventListener("abort", giveUp);
  }
}
/** The HTTP status a socket that never upgraded was refused with, if its factory can tell. */
export async function refusalStatus(
  socket: WebSocketLike,
  signal?: AbortSignal,
): Promise<number | undefined> {
  if (socket.authRejected !== undefined) return socket.authRejected;
  try {
    return await socket.upgradeStatus?.(signal);
  } catch {
    return undefined;
  }
}
