import { BEARER_SUBPROTOCOL_PREFIX, SUBPROTOCOL } from "../../protocol/index.js";

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
  authRejected?: 401 | 403;
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

/** A factory for browsers, which cannot set headers: the token rides as a subprotocol entry. */
export function browserSocketFactory(WebSocketClass: WebSocketConstructor): SocketFactory {
  return (url, token) => new WebSocketClass(url, browserSubprotocols(token)) as WebSocketLike;
}
