import { Decoder, Encoder } from "@msgpack/msgpack";

const encoder = new Encoder();
const decoder = new Decoder();

/*
 * msgpack with one encoder and one decoder for the whole process, as the store and the mux keep
 * theirs: the library's `encode()` and `decode()` build a new one (and its buffers) per call, a
 * cost neither a limit nor a bench client should carry.
 */

/** Returns a copy, so the bytes stay valid after the next call. */
export const encode = (value: unknown): Uint8Array => encoder.encode(value);

export const decode = (bytes: Uint8Array): unknown => decoder.decode(bytes);
