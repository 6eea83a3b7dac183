import { encodeFrame } from "../../protocol/codec.js";
import type { ClientFrame } from "../../protocol/index.js";
import type { RequestRegistry, StreamSink } from "./request-registry.js";
import { sendIfOpen, type WebSocketLike } from "./socket.js";

/** One open physical socket: send calls and streams over it while it lives. */
export interface SocketLink {
  readonly socketId: number;
  /** Rejects with `signal.reason` when the signal fires first. */
  call(method: string, params: unknown, signal?: AbortSignal): Promise<unknown>;
  /** Returns the frame id of the new stream. */
  openStream(method: string, params: unknown, sink: StreamSink): number;
  /** Forgets the stream and sends `close` if it was still in flight. */
  closeStream(id: number): void;
}

/** What a link needs from its connection: fresh frame ids, and whether its socket is still the current one. */
export interface LinkContext {
  readonly socketId: number;
  readonly socket: WebSocketLike;
  readonly registry: RequestRegistry;
  nextFrameId(): number;
  isCurrent(): boolean;
}

/** Sends §3 frames over one socket and registers what awaits an answer in its registry. */
export function createSocketLink(ctx: LinkContext): SocketLink {
  const { socket, registry } = ctx;
  const send = (frame: ClientFrame): void => sendIfOpen(socket, encodeFrame(frame));
  return {
    socketId: ctx.socketId,
    call: (method, params, signal) =>
      new Promise((resolve, reject) => {
        const id = ctx.nextFrameId();
        // No cancel frame exists (§3): an aborted call is forgotten here, a late answer dropped.
        const onAbort = () => {
          if (registry.removeCall(id)) reject(signal?.reason);
        };
        const settled = () => signal?.removeEventListener("abort", onAbort);
        registry.addCall(id, {
          resolve: (value) => {
            settled();
            resolve(value);
          },
          reject: (error) => {
            settled();
            reject(error);
          },
        });
        if (signal?.aborted) return onAbort();
        signal?.addEventListener("abort", onAbort, { once: true });
        send({ type: "call", id, method, params });
      }),
    openStream: (method, params, sink) => {
      const id = ctx.nextFrameId();
      registry.addStream(id, sink);
      send({ type: "open", id, method, params });
      return id;
    },
    closeStream: (id) => {
      if (registry.removeStream(id) && ctx.isCurrent()) send({ type: "close", id });
    },
  };
}
