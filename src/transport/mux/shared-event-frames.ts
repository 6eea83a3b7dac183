import { encodeFrame } from "../../../protocol/codec.js";
import type { Notification } from "../../../protocol/index.js";

/** One tick's §6 `event` frames, encoded once for every socket that receives the same list. */
export interface SharedEventFrames {
  /** One MessagePack frame per notification, for sockets written through `ws`. */
  readonly payloads: readonly Uint8Array[];
  readonly payloadBytes: number;
  /**
   * The same frames as complete WebSocket messages back to back (RFC 6455 §5.2, unmasked as
   * every server frame is): one write puts the whole tick on a socket.
   */
  readonly wire: Buffer;
}

const built = new WeakMap<readonly Notification[], SharedEventFrames>();

/** Keyed by the list's identity: the hub hands the same frozen list to every socket that sees it. */
export function sharedEventFrames(list: readonly Notification[]): SharedEventFrames {
  let frames = built.get(list);
  if (!frames) {
    frames = build(list);
    built.set(list, frames);
  }
  return frames;
}

function build(list: readonly Notification[]): SharedEventFrames {
  const payloads = list.map((n) => encodeFrame({ type: "event", name: n.name, value: n.value }));
  let payloadBytes = 0;
  let wireBytes = 0;
  for (const p of payloads) {
    payloadBytes += p.length;
    wireBytes += headerLength(p.length) + p.length;
  }
  const wire = Buffer.allocUnsafe(wireBytes);
  let at = 0;
  for (const p of payloads) {
    at = writeHeader(wire, at, p.length);
    wire.set(p, at);
    at += p.length;
  }
  return { payloads, payloadBytes, wire };
}

const headerLength = (length: number): number => (length < 126 ? 2 : length < 0x10000 ? 4 : 10);

/** FIN + binary opcode, then the 7-bit, 16-bit or 64-bit payload length, no mask. */
function writeHeader(target: Buffer, at: number, length: number): number {
  target[at] = 0x82;
  if (length < 126) {
    target[at + 1] = length;
    return at + 2;
  }
  if (length < 0x10000) {
    target[at + 1] = 126;
    target.writeUInt16BE(length, at + 2);
    return at + 4;
  }
  target[at + 1] = 127;
  target.writeUInt32BE(Math.floor(length / 0x1_0000_0000), at + 2);
  target.writeUInt32BE(length >>> 0, at + 6);
  return at + 10;
}
