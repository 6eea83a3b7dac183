import WebSocket from "ws";
import { Limits, SUBPROTOCOL } from "../../protocol/index.js";
import { type ClientOptions, createClient, type SessionmuxClient } from "./client.js";
import type { SocketFactory, WebSocketLike } from "./socket.js";

export * from "./index.js";

/** A socket factory for Node: `ws` with the token in the `Authorization: Bearer` header (§2). */
export const nodeSocketFactory: SocketFactory = (url, token) => {
  const socket = new WebSocket(url, [SUBPROTOCOL], {
    headers: { Authorization: `Bearer ${token}` },
    perMessageDeflate: false,
    maxPayload: Limits.maxPayloadBytes,
  });
  const like = socket as unknown as WebSocketLike;
  socket.on("unexpected-response", (request, response) => {
    if (response.statusCode === 401 || response.statusCode === 403) like.authRejected = response.statusCode;
    // Without a listener ws would abort for us; with one we must, or the socket hangs.
    request.destroy();
    response.destroy();
    socket.terminate();
  });
  return like;
};

/** `createClient` for Node: uses `ws` with the Authorization header unless a factory is given. */
export function createNodeClient(options: Omit<ClientOptions, "WebSocket">): SessionmuxClient {
  return createClient({ socketFactory: nodeSocketFactory, ...options });
}
