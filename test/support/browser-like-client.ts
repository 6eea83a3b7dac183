import { createClient, createNodeSocketFactory, type SessionmuxClient } from "../../src/client/node.js";

/**
 * A Node client that keeps alive as a browser does: no WebSocket ping, and its probe (a `close`
 * for an unused id) is answered behind whatever the socket carries. So a host message that takes
 * longer than `intervalMs + pongTimeoutMs` to cross the link gets the socket dropped, as it would
 * in a browser; the tests of slow links count sockets opened with it.
 */
export function browserLikeClient(
  url: string,
  token: string,
  keepAlive = { intervalMs: 2_000, pongTimeoutMs: 1_000 },
): SessionmuxClient {
  const node = createNodeSocketFactory();
  return createClient({
    url,
    token,
    socketFactory: (target, bearer) => {
      const socket = node(target, bearer);
      socket.keepAlivePing = undefined;
      return socket;
    },
    keepAlive,
  });
}
