import { encodeFrame } from "../../../protocol/codec.js";
import type { HostFrame } from "../../../protocol/index.js";

/**
 * The MessagePack bytes of `frame` up to its last value, an empty binary (following the last key
 * of nested maps), with that value's header rewritten as a bin32 of `length` bytes: the head of a
 * message whose body bytes follow as they are read (an attachment's, chunk by chunk). Head and
 * body joined are exactly `encodeFrame` of the frame with the body in place of the empty binary.
 */
export function trailingBinaryHead(frame: HostFrame, length: number): Uint8Array {
  const encoded = encodeFrame(frame);
  const end = encoded.byteLength - 2;
  if (encoded[end] !== 0xc4 || encoded[end + 1] !== 0x00)
    throw new TypeError("the frame's last value must be an empty binary");
  const head = new Uint8Array(end + 5);
  head.set(encoded.subarray(0, end));
  head[end] = 0xc6;
  new DataView(head.buffer).setUint32(end + 1, length);
  return head;
}
