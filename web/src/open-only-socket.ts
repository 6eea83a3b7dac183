import { browserSocketFactory, type SocketFactory, type WebSocketLike } from "../../src/client/index.js";

/**
 * The SDK's browser socket (the token as the `bearer.` subprotocol entry; a refused upgrade
 * explained by asking the host over HTTP) that sends only while open: Chromium logs an error for
 * every frame sent on a closing socket, which the SDK may do in the moment a host goes away.
 */
class OpenOnlySocket implements WebSocketLike {
  onopen: ((event: unknown) => void) | null = null;
  onmessage: ((event: { data: unknown }) => void) | null = null;
  onclose: ((event: { code: number; reason: string }) => void) | null = null;
  onerror: ((event: unknown) => void) | null = null;

  constructor(private readonly socket: WebSocketLike) {
    socket.onopen = (event) => this.onopen?.(event);
    socket.onmessage = (event) => this.onmessage?.(event);
    socket.onerror = (event) => this.onerror?.(event);
    socket.onclose = (event) => this.onclose?.(event);
  }

  get binaryType(): string {
    return this.socket.binaryType;
  }

  set binaryType(value: string) {
    this.socket.binaryType = value;
  }

  get readyState(): number {
    return this.socket.readyState;
  }

  get authRejected(): 401 | 403 | undefined {
    return this.socket.authRejected;
  }

  upgradeStatus(): Promise<number | undefined> {
    return this.socket.upgradeStatus?.() ?? Promise.resolve(undefined);
  }

  send(data: Uint8Array): void {
    if (this.socket.readyState === WebSocket.OPEN) this.socket.send(data);
  }

  close(code?: number, reason?: string): void {
    this.socket.close(code, reason);
  }
}

export function openOnlySocketFactory(): SocketFactory {
  const open = browserSocketFactory(WebSocket);
  return (url, token) => new OpenOnlySocket(open(url, token));
}
