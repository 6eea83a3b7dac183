import { Decoder } from "@msgpack/msgpack";
import { encodeFrame } from "../../protocol/codec.js";

// Stored bytes are spliced into wire frames as they are (readAfterEncoded), so they are written by
// the wire's own encoder: one encoding, `undefined` fields dropped rather than stored as nil.
// Reading trusts what this store wrote, so it skips the wire decoder's limits.
const decoder = new Decoder();

/** Event data and prompt records are stored as MessagePack BLOBs. */
export function encodeValue(value: unknown): Uint8Array {
  return encodeFrame(value);
}

export function decodeValue<T>(bytes: Uint8Array): T {
  return decoder.decode(bytes) as T;
}
