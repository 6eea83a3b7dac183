import type { IncomingMessage } from "node:http";
import type { Duplex } from "node:stream";
import { MUX_PATH, SUBPROTOCOL } from "../../../protocol/index.js";
import type { Principal } from "../../host/principal.js";
import type { Authenticator } from "../auth.js";

export type UpgradeVerdict =
  | { ok: true; principal: Principal }
  | { ok: false; status: 400 | 401 | 403 | 404 | 429 | 503; code: string; message: string };

/**
 * Decides an upgrade request before any WebSocket exists (protocol-v1 §2): path, then token
 * (header or `bearer.` subprotocol entry; never the URL), then Origin, then the `sessionmux.v1`
 * subprotocol.
 */
export function judgeUpgrade(req: IncomingMessage, auth: Authenticator): UpgradeVerdict {
  if (pathOf(req.url) !== MUX_PATH)
    return { ok: false, status: 404, code: "not_found", message: "no such route" };
  const outcome = auth.authenticate(req, { allowSubprotocol: true });
  if (!outcome.ok) {
    return outcome.status === 401
      ? { ok: false, status: 401, code: "unauthorized", message: "a valid bearer token is required" }
      : { ok: false, status: 403, code: "forbidden_origin", message: "this Origin is not allowed" };
  }
  if (!offersSubprotocol(req.headers["sec-websocket-protocol"])) {
    return { ok: false, status: 400, code: "bad_request", message: `subprotocol ${SUBPROTOCOL} is required` };
  }
  return { ok: true, principal: outcome.principal };
}

export function isMuxPath(url: string | undefined): boolean {
  return pathOf(url) === MUX_PATH;
}

/** Answers a refused upgrade on the raw socket and closes it. */
export function refuseUpgrade(socket: Duplex, verdict: Extract<UpgradeVerdict, { ok: false }>): void {
  const body = JSON.stringify({ error: verdict.code, message: verdict.message });
  const reason = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    429: "Too Many Requests",
    503: "Service Unavailable",
  }[verdict.status];
  const head = [
    `HTTP/1.1 ${verdict.status} ${reason}`,
    "Connection: close",
    "Content-Type: application/json",
    `Content-Length: ${Buffer.byteLength(body)}`,
  ];
  if (verdict.status === 401) head.push('WWW-Authenticate: Bearer realm="sessionmux"');
  if (!socket.writable) return void socket.destroy();
  socket.end(`${head.join("\r\n")}\r\n\r\n${body}`, () => socket.destroy());
}

function pathOf(url: string | undefined): string {
  if (url === undefined) return "";
  const q = url.indexOf("?");
  return q === -1 ? url : url.slice(0, q);
}

/** Linear in the header length: a plain split, no backtracking pattern (CVE-2021-32640). */
function offersSubprotocol(header: string | undefined): boolean {
  if (typeof header !== "string" || header.length > 8192) return false;
  for (const entry of header.split(",")) {
    if (entry.trim() === SUBPROTOCOL) return true;
  }
  return false;
}
