import type { Socket } from "node:net";

/**
 * The framing the mux writes beside `ws` (RFC 6455 §5.2) and the one place it reaches past the
 * documented surface of Node, kept together so one test (`test/transport/mux/ws-framing.test.ts`)
 * checks them against `ws`'s own receiver and the installed Node.
 */

const FIN_BINARY = 0x82;

/** Bytes of the RFC 6455 §5.2 header of an unmasked message of `length` payload bytes. */
function headerLength(length: number): number {
  return length < 126 ? 2 : length < 0x10000 ? 4 : 10;
}

/** Writes that header at `out[0…]` and returns its length. */
function writeHeader(out: Buffer, length: number): number {
  out[0] = FIN_BINARY;
  if (length < 126) {
    out[1] = length;
    return 2;
  }
  if (length < 0x10000) {
    out[1] = 126;
    out.writeUInt16BE(length, 2);
    return 4;
  }
  out[1] = 127;
  out.writeUInt32BE(Math.floor(length / 0x100000000), 2);
  out.writeUInt32BE(length % 0x100000000, 6);
  return 10;
}

/** The header of one unmasked, final, binary server message (as every server frame is). */
export function binaryMessageHeader(payload: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(headerLength(payload.length));
  writeHeader(out, payload.length);
  return out;
}

/** A whole binary message of payload `head` then `body`, header included, in one buffer. */
export function binaryMessage(head: Uint8Array, body: Uint8Array): Buffer {
  const out = framed(head, body.length, body.length);
  out.set(body, out.length - body.length);
  return out;
}

/**
 * The header and `head` of a binary message of payload `head` then `bodyLength` more bytes,
 * which the caller writes next as they are (a large body is never copied).
 */
export function binaryMessageStart(head: Uint8Array, bodyLength: number): Buffer {
  return framed(head, bodyLength, 0);
}

/** Header and `head`, with `room` bytes left at the end. */
function framed(head: Uint8Array, bodyLength: number, room: number): Buffer {
  const length = head.length + bodyLength;
  const out = Buffer.allocUnsafe(headerLength(length) + head.length + room);
  out.set(head, writeHeader(out, length));
  return out;
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
