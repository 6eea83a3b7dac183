/**
 * The head of a WebSocket upgrade request as a client writes it on a raw socket (RFC 6455's sample
 * key), one line per entry, `headers` after the handshake's own.
 */
export function upgradeRequestHead(headers: readonly string[], path = "/api/remote.mux"): string[] {
  return [
    `GET ${path} HTTP/1.1`,
    "Host: 127.0.0.1",
    "Connection: Upgrade",
    "Upgrade: websocket",
    "Sec-WebSocket-Version: 13",
    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
    ...headers,
  ];
}

/** That request as written on the socket, ending with its blank line. */
export function upgradeRequest(headers: readonly string[], path?: string): string {
  return `${upgradeRequestHead(headers, path).join("\r\n")}\r\n\r\n`;
}
