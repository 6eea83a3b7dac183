import { Decoder, Encoder } from "@msgpack/msgpack";

// `undefined` fields are dropped rather than stored as nil, so an optional field that was absent
// reads back absent instead of `null`.
const encoder = new Encoder({ ignoreUndefined: true });
const decoder = new Decoder();

/** Event data and prompt records are stored as MessagePack BLOBs. */
export function encodeValue(value: unknown): Uint8Array {
  return encoder.encode(value);
}

export function decodeValue<T>(bytes: Uint8Array): T {
  return decoder.decode(bytes) as T;
}
