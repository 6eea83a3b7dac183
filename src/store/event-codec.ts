import { Decoder } from "@msgpack/msgpack";
import { encodeFrameShared } from "../../protocol/codec.js";

// Stored bytes are spliced into wire frames as they are (readAfterEncoded), so they are written by
// the wire's own encoder: one encoding, `undefined` fields dropped rather than stored as nil.
// Reading trusts what this store wrote, so it skips the wire decoder's limits.
const decoder = new Decoder();

/**
 * Event data and prompt records are stored as MessagePack BLOBs. The bytes are copied into
 * Node's pooled slab: the encoder's own copy gave each event (most under 100 bytes) a backing
 * store of its own to allocate and sweep, 40% of encoding an event.
 */
export function encodeValue(value: unknown): Buffer {
  const encoded = encodeFrameShared(value);
  const bytes = Buffer.allocUnsafe(encoded.length);
  bytes.set(encoded);
  return bytes;
}

export function decodeValue<T>(bytes: Uint8Array): T {
  return decoder.decode(bytes) as T;
}
