import type { Socket } from "node:net";
import * as wsModule from "ws";

/**
 * The two places the mux reaches past the documented surface of `ws` and Node, kept together so
 * one test (`test/transport/mux/ws-framing.test.ts`) pins them to the installed versions.
 */

interface FrameOptions {
  fin: boolean;
  opcode: number;
  mask: boolean;
  readOnly: boolean;
  rsv1: boolean;
}

/** `ws` exports its framing (`Sender.frame`); `@types/ws` does not declare it. */
const { Sender } = wsModule as unknown as {
  Sender: { frame(data: Buffer, options: FrameOptions): Buffer[] };
};

const BINARY = 0x02;

/** The RFC 6455 §5.2 header of one unmasked, final, binary server message of `length` bytes. */
export function binaryMessageHeader(payload: Uint8Array): Buffer {
  const data = Buffer.from(payload.buffer, payload.byteOffset, payload.byteLength);
  const parts = Sender.frame(data, { fin: true, opcode: BINARY, mask: false, readOnly: true, rsv1: false });
  // Unmasked framing returns [header, data] without copying the payload.
  return parts[0] as Buffer;
}

/** Node's own counters of a TCP socket: bytes handed to libuv, and what libuv still holds. */
interface SocketInternals {
  _bytesDispatched?: number;
  _handle?: { writeQueueSize?: number } | null;
}

/**
 * Bytes the kernel has accepted from `socket` so far; growth while a backlog exists means the
 * peer reads. Node's public counters complete a write only once all of it is in the kernel, so a
 * peer slowly reading one large frame would look stalled: libuv's write queue shows the partial
 * progress. Falls back to the public counters when the internals are absent.
 */
export function bytesTakenByKernel(socket: Socket): number {
  const internals = socket as unknown as SocketInternals;
  const queued = internals._handle?.writeQueueSize;
  if (typeof internals._bytesDispatched === "number" && typeof queued === "number") {
    return internals._bytesDispatched - queued;
  }
  return socket.bytesWritten - socket.writableLength;
}
