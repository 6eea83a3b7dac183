import type { Socket } from "node:net";
import type { MuxPeer } from "../../support/mux-peer.js";

export interface SlowReader {
  /** Bytes read from the socket since the reader started. */
  readonly read: number;
  /** Stops reading for good: the socket stays paused, whatever `ws` would do on its own. */
  stop(): void;
}

/**
 * Makes `peer` read its socket like a slow link: one chunk (64 KiB at most), then nothing for
 * `everyMs`. The pauses go through `ws`, whose own flow control would otherwise resume the socket
 * early; once stopped, nothing resumes it, so no more of a message arrives.
 */
export function slowReader(peer: MuxPeer, everyMs: number): SlowReader {
  const socket = (peer.ws as unknown as { _socket: Socket })._socket;
  let read = 0;
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  socket.on("data", (chunk: Buffer) => {
    read += chunk.length;
    peer.ws.pause();
    if (stopped || timer) return;
    timer = setTimeout(() => {
      timer = undefined;
      if (!stopped) peer.ws.resume();
    }, everyMs);
  });
  return {
    get read() {
      return read;
    },
    stop() {
      stopped = true;
      clearTimeout(timer);
      peer.ws.pause();
    },
  };
}
