import { encodeFrame } from "../../protocol/codec.js";
import { SessionmuxError } from "../../protocol/errors.js";
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
  /** The largest frame the host said it reads (its `hello`); undefined: it did not say. */
  maxPayloadBytes(): number | undefined;
}

/**
 * A frame over the host's limit would make it close the socket (1009), failing every call and
 * stream on it, and a resent call would do it again on every new socket: it is refused here.
 */
function oversized(bytes: number, max: number | undefined, what: string): SessionmuxError | undefined {
  if (max === undefined || bytes <= max) return undefined;
  return new SessionmuxError(
    "payload_too_large",
    `the ${what} is ${bytes} bytes encoded; the host reads frames of at most ${max} bytes`,
    { data: { bytes, max } },
  );
}

/** Sends §3 frames over one socket and registers what awaits an answer in its registry. */
export function createSocketLink(ctx: LinkContext): SocketLink {
  const { socket, registry } = ctx;
  const send = (frame: ClientFrame): void => sendIfOpen(socket, encodeFrame(frame));
  /** Sends a call or open frame, or answers why not. */
  const sendRequest = (frame: ClientFrame & { method: string }): SessionmuxError | undefined => {
    const encoded = encodeFrame(frame);
    const refusal = oversized(encoded.byteLength, ctx.maxPayloadBytes(), `${frame.method} ${frame.type}`);
    if (!refusal) sendIfOpen(socket, encoded);
    return refusal;
  };
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
        const refusal = sendRequest({ type: "call", id, method, params });
        if (refusal) {
          registry.removeCall(id);
          return reject(refusal);
        }
        signal?.addEventListener("abort", onAbort, { once: true });
      }),
    openStream: (method, params, sink) => {
      const id = ctx.nextFrameId();
      registry.addStream(id, sink);
      const refusal = sendRequest({ type: "open", id, method, params });
      if (refusal && registry.removeStream(id)) sink.error(refusal);
      return id;
    },
    closeStream: (id) => {
      if (registry.removeStream(id) && ctx.isCurrent()) send({ type: "close", id });
    },
  };
}
