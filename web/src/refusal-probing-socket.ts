import { browserSubprotocols, type SocketFactory, type WebSocketLike } from "../../src/client/index.js";

/** How long the console waits for the HTTP question that explains a failed upgrade. */
const PROBE_TIMEOUT_MS = 5_000;

/**
 * Asks the host over plain HTTP, with the same token, why a socket could not upgrade. A browser
 * hides the status of a refused upgrade, but the host checks auth before the route (§8), so a GET
 * of the mux path answers 401/403 for a refused token or origin; anything else (404, or no answer
 * at all) means the token is not the problem.
 */
export async function askRefusal(url: string, token: string): Promise<401 | 403 | undefined> {
  try {
    const response = await fetch(url.replace(/^ws/, "http"), {
      headers: { authorization: `Bearer ${token}` },
      cache: "no-store",
      signal: AbortSignal.timeout(PROBE_TIMEOUT_MS),
    });
    await response.body?.cancel();
    return response.status === 401 || response.status === 403 ? response.status : undefined;
  } catch {
    return undefined;
  }
}

/**
 * A browser WebSocket that, when it closes without ever opening, first learns whether the host
 * refused the token and reports it through `authRejected` (which stops the client's reconnect
 * loop) and `onRefused` (which tells the console why). Frames are only sent on an open socket:
 * Chromium logs an error for a send on a closing one.
 */
class RefusalProbingSocket implements WebSocketLike {
  onopen: ((event: unknown) => void) | null = null;
  onmessage: ((event: { data: unknown }) => void) | null = null;
  onclose: ((event: { code: number; reason: string }) => void) | null = null;
  onerror: ((event: unknown) => void) | null = null;
  authRejected?: 401 | 403;
  private readonly socket: WebSocket;
  private opened = false;
  private refusal: Promise<401 | 403 | undefined> | undefined;

  constructor(url: string, token: string, onRefused: (status: 401 | 403) => void) {
    const socket = new WebSocket(url, browserSubprotocols(token));
    this.socket = socket;
    socket.onopen = (event) => {
      this.opened = true;
      this.onopen?.(event);
    };
    socket.onmessage = (event) => this.onmessage?.(event);
    socket.onerror = (event) => this.onerror?.(event);
    socket.onclose = (event) => {
      if (this.opened) {
        this.onclose?.(event);
        return;
      }
      this.refusal ??= askRefusal(url, token);
      void this.refusal.then((status) => {
        if (status !== undefined) {
          this.authRejected = status;
          onRefused(status);
        }
        this.onclose?.(event);
      });
    };
  }

  /** The refusal this socket learned, for a client that asks its socket rather than reading `authRejected`. */
  upgradeStatus(): Promise<number | undefined> {
    return this.refusal ?? Promise.resolve(undefined);
  }

  get binaryType(): string {
    return this.socket.binaryType;
  }

  set binaryType(value: string) {
    this.socket.binaryType = value as BinaryType;
  }

  get readyState(): number {
    return this.socket.readyState;
  }

  send(data: Uint8Array): void {
    if (this.socket.readyState === WebSocket.OPEN) this.socket.send(data);
  }

  close(code?: number, reason?: string): void {
    this.socket.close(code, reason);
  }
}

/** The console's socket factory: the token as the `bearer.` subprotocol entry, refusals explained. */
export function refusalProbingSocketFactory(onRefused: (status: 401 | 403) => void): SocketFactory {
  return (url, token) => new RefusalProbingSocket(url, token, onRefused);
}
