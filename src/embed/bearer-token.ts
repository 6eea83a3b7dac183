import type { IncomingMessage } from "node:http";
import { Authenticator } from "../transport/auth.js";

/**
 * The bearer token a request carries, for an app's own `authenticate`: the `Authorization:
 * Bearer` header, or on a WebSocket upgrade the `bearer.` subprotocol entry, where a browser's
 * client puts it (a browser cannot set headers on a WebSocket). An app that read the header
 * alone refused every browser client, which then retried as if the host were down.
 */
export function bearerToken(request: IncomingMessage): string | undefined {
  const upgrade = request.headers.upgrade;
  return Authenticator.tokenOf(request, {
    allowSubprotocol: typeof upgrade === "string" && upgrade.toLowerCase() === "websocket",
  });
}
