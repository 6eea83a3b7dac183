/** The WebSocket subprotocol of protocol-v1 §2. */
export const SUBPROTOCOL = "sessionmux.v1";
/** A browser, which cannot set headers on a WebSocket, offers its token as this prefix and the token. */
export const BEARER_SUBPROTOCOL_PREFIX = "bearer.";
