/**
 * The frame codec of protocol-v1 §2: one MessagePack map per binary frame.
 * Browser-safe (no Node imports): the host and the client SDK both use it.
 *
 * Untrusted bytes are first walked by a structural scanner (`msgpack-scanner.ts`) that enforces
 * every limit without building values and without recursion, then handed to `@msgpack/msgpack`'s
 * iterative decoder, whose own limits repeat the checks.
 */
import { Decoder, Encoder } from "@msgpack/msgpack";
import { DEFAULT_DECODE_LIMITS, type DecodeLimits } from "./decode-limits.js";
import { SessionmuxError } from "./errors.js";
import { scanMessagePack } from "./msgpack-scanner.js";

export { DEFAULT_DECODE_LIMITS, type DecodeLimits } from "./decode-limits.js";

// Absent optional fields must stay absent on the wire: a nil would fail `Optional(...)` schemas.
const encoder = new Encoder({ ignoreUndefined: true });

export function encodeFrame(value: unknown): Uint8Array {
  return encoder.encode(value);
}

/**
 * `encodeFrame`'s bytes without their copy: a view of the encoder's own buffer, valid only until
 * the next encoding, for a caller that copies them at once into memory of its choosing.
 */
export function encodeFrameShared(value: unknown): Uint8Array {
  return encoder.encodeSharedRef(value);
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

// Callers pass one limits object per connection (or none) and never change it, so a frame finds
// its merged limits and decoder by that object instead of merging them every time.
const byLimitsObject = new WeakMap<Partial<DecodeLimits>, Decoding>();

function decodingWith(limits: Partial<DecodeLimits> = DEFAULT_DECODE_LIMITS): Decoding {
  let decoding = byLimitsObject.get(limits);
  if (!decoding) {
    // A limit given as undefined keeps its default: spreading it would lift the limit instead.
    const effective = { ...DEFAULT_DECODE_LIMITS };
    for (const key of Object.keys(effective) as (keyof DecodeLimits)[])
      effective[key] = limits[key] ?? effective[key];
    decoding = {
      effective,
      decoder: new Decoder({
        maxStrLength: effective.maxStrBytes,
        maxBinLength: effective.maxBinBytes,
        maxArrayLength: effective.maxArrayLength,
        maxMapLength: effective.maxMapLength,
        maxExtLength: 0,
        mapKeyConverter: (k: unknown) => {
          if (typeof k !== "string") throw new Error("map keys must be strings");
          return k;
        },
      }),
    };
    byLimitsObject.set(limits, decoding);
  }
  return decoding;
}
