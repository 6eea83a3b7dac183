import { Encoder } from "@msgpack/msgpack";

const encoder = new Encoder();

/**
 * msgpack with one encoder for the whole process, as the store and the mux keep theirs: the
 * library's `encode()` builds a new encoder and its 2 KiB buffer per call, a cost neither a limit
 * nor a bench client should carry. Returns a copy, so the bytes stay valid after the next call.
 */
export const encode = (value: unknown): Uint8Array => encoder.encode(value);
