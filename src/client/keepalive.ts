import { encodeFrame } from "../../protocol/codec.js";
import { sendIfOpen, type WebSocketLike } from "./socket.js";

/** Client keepalive timing (protocol-v1 §2 "Clients may ping"). */
export interface KeepAliveOptions {
  /** Probe a socket that has been quiet this long. @default 10_000 */
  intervalMs: number;
  /** Declare the socket dead when nothing arrives this long after a probe. @default 5_000 */
  pongTimeoutMs: number;
}

/** The client's default keepalive: probe after 10 s of quiet, give up 5 s later. */
export const DEFAULT_KEEPALIVE: Readonly<KeepAliveOptions> = Object.freeze({
  intervalMs: 10_000,
  pongTimeoutMs: 5_000,
});

/**
 * One socket's keepalive, as tRPC's ws link does it: after `intervalMs` without hearing anything,
 * send a probe; if nothing at all arrives within `pongTimeoutMs`, the path is dead. Anything heard
 * (a frame, a ping, a pong) proves the path and restarts the wait, so a busy socket is never probed.
 */
export class KeepAlive {
  readonly #options: KeepAliveOptions;
  readonly #probe: () => void;
  readonly #dead: () => void;
  #idle: ReturnType<typeof setTimeout> | undefined;
  #deadline: ReturnType<typeof setTimeout> | undefined;
  /**
   * The probe's wait is over: judged once more, after the I/O that came in meanwhile is read. Past
   * a stall of the client's own (a busy tab, a long synchronous task) the late timer runs before
   * the answer that arrived during it; a timer set from a timer runs after that answer (in Node,
   * after the event loop's next poll), which then clears it.
   */
  readonly #expired = () => {
    this.#deadline = setTimeout(this.#dead, 0);
  };

  constructor(options: KeepAliveOptions, probe: () => void, dead: () => void) {
    this.#options = options;
    this.#probe = probe;
    this.#dead = dead;
  }

  /** Something arrived: the path works. Starts (or restarts) the quiet wait. */
  heard(): void {
    this.stop();
    this.#idle = setTimeout(() => {
      this.#idle = undefined;
      this.#deadline = setTimeout(this.#expired, this.#options.pongTimeoutMs);
      this.#probe();
    }, this.#options.intervalMs);
  }

  /**
   * Probes at once, as if the quiet wait had ended (a network hint says the path may be gone),
   * unless a probe already waits for its answer: a dead path is then dropped within
   * `pongTimeoutMs` rather than `intervalMs + pongTimeoutMs`.
   */
  probeNow(): void {
    if (this.#deadline !== undefined) return;
    clearTimeout(this.#idle);
    this.#idle = undefined;
    this.#deadline = setTimeout(this.#expired, this.#options.pongTimeoutMs);
    this.#probe();
  }

  /** Clears both timers (the socket is gone). */
  stop(): void {
    clearTimeout(this.#idle);
    clearTimeout(this.#deadline);
    this.#idle = undefined;
    this.#deadline = undefined;
  }
}

/**
 * The probe for one socket: a WebSocket ping where the factory can send one (`ws`), else —
 * browsers cannot ping — a `close` for an id never used, which the host answers with `end` (§9).
 */
export function keepAliveProbe(socket: WebSocketLike, nextFrameId: () => number): () => void {
  if (socket.keepAlivePing) return () => socket.keepAlivePing?.();
  return () => sendIfOpen(socket, encodeFrame({ type: "close", id: nextFrameId() }));
}
