import { Decoder, Encoder } from "@msgpack/msgpack";
import { SessionmuxError } from "./errors.js";
import { Limits } from "./limits.js";
import { scanMessagePack } from "./msgpack-scanner.js";

/**
 * The frame codec of protocol-v1 §2: one MessagePack map per binary frame.
 * Browser-safe (no Node imports): the host and the client SDK both use it.
 *
 * Untrusted bytes are first walked by a structural scanner (`msgpack-scanner.ts`) that enforces
 * every limit without building values and without recursion, then handed to `@msgpack/msgpack`'s
 * iterative decoder, whose own limits repeat the checks.
 */
export interface DecodeLimits {
  /** @default 64 KiB — UTF-8 bytes of one string. */
  maxStrBytes: number;
  /** @default 1 MiB — bytes of one binary. */
  maxBinBytes: number;
  /** @default 10,000 — elements of one array. */
  maxArrayLength: number;
  /** @default 1,000 — entries of one map. */
  maxMapLength: number;
  /** @default 32 — nested arrays and maps; the top-level map is depth 1. */
  maxDepth: number;
}

export const DEFAULT_DECODE_LIMITS: Readonly<DecodeLimits> = Object.freeze({
  maxStrBytes: Limits.maxStrBytes,
  maxBinBytes: Limits.maxBinBytes,
  maxArrayLength: Limits.maxArrayLength,
  maxMapLength: Limits.maxMapLength,
  maxDepth: Limits.maxDepth,
});

// Absent optional fields must stay absent on the wire: a nil would fail `Optional(...)` schemas.
const encoder = new Encoder({ ignoreUndefined: true });
const decoders = new Map<string, Decoder>();

export function encodeFrame(value: unknown): Uint8Array {
  return encoder.encode(value);
}

/** Decodes one frame; anything undecodable or over the limits throws `bad_frame`. */
export function decodeFrame(bytes: Uint8Array, limits?: Partial<DecodeLimits>): unknown {
  const { effective, decoder } = decodingWith(limits);
  scanMessagePack(bytes, effective);
  try {
    return decoder.decode(bytes);
  } catch (err) {
    throw new SessionmuxError("bad_frame", `undecodable MessagePack: ${(err as Error).message}`, {
      cause: err,
    });
  }
}

interface Decoding {
  effective: DecodeLimits;
  decoder: Decoder;
}

// Callers pass one limits object per connection (or none) and never change it, so a frame looks
// its decoder up by that object instead of merging the limits and building a key every time.
const byLimitsObject = new WeakMap<Partial<DecodeLimits>, Decoding>();
let defaultDecoding: Decoding | undefined;

function decodingWith(limits: Partial<DecodeLimits> | undefined): Decoding {
  if (limits === undefined) {
    defaultDecoding ??= { effective: DEFAULT_DECODE_LIMITS, decoder: decoderFor(DEFAULT_DECODE_LIMITS) };
    return defaultDecoding;
  }
  let decoding = byLimitsObject.get(limits);
  if (!decoding) {
    const effective = { ...DEFAULT_DECODE_LIMITS, ...limits };
    decoding = { effective, decoder: decoderFor(effective) };
    byLimitsObject.set(limits, decoding);
  }
  return decoding;
}

function decoderFor(limits: DecodeLimits): Decoder {
  const key = `${limits.maxStrBytes}/${limits.maxBinBytes}/${limits.maxArrayLength}/${limits.maxMapLength}`;
  let decoder = decoders.get(key);
  if (!decoder) {
    decoder = new Decoder({
      maxStrLength: limits.maxStrBytes,
      maxBinLength: limits.maxBinBytes,
      maxArrayLength: limits.maxArrayLength,
      maxMapLength: limits.maxMapLength,
      maxExtLength: 0,
      mapKeyConverter: (k: unknown) => {
        if (typeof k !== "string") throw new Error("map keys must be strings");
        return k;
      },
    });
    decoders.set(key, decoder);
  }
  return decoder;
}
