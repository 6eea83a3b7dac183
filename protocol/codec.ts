import { Decoder, Encoder } from "@msgpack/msgpack";
import { SessionmuxError } from "./errors.js";
import { Limits } from "./limits.js";

/**
 * The frame codec of protocol-v1 §2: one MessagePack map per binary frame.
 * Browser-safe (no Node imports): the host and the client SDK both use it.
 *
 * Untrusted bytes are first walked by a structural scanner that enforces every limit without
 * building values and without recursion (so 10,000-deep nesting costs a counter, not a stack),
 * then handed to `@msgpack/msgpack`'s iterative decoder, whose own limits repeat the checks.
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

/** Keys that could reach an object's prototype chain in careless consumers. */
const FORBIDDEN_KEYS = new Set(["__proto__", "constructor", "prototype"]);
const LONGEST_FORBIDDEN_KEY = 11;

// Absent optional fields must stay absent on the wire: a nil would fail `Optional(...)` schemas.
const encoder = new Encoder({ ignoreUndefined: true });
const decoders = new Map<string, Decoder>();

export function encodeFrame(value: unknown): Uint8Array {
  return encoder.encode(value);
}

/** Decodes one frame; anything undecodable or over the limits throws `bad_frame`. */
export function decodeFrame(bytes: Uint8Array, limits?: Partial<DecodeLimits>): unknown {
  const effective = limits === undefined ? DEFAULT_DECODE_LIMITS : { ...DEFAULT_DECODE_LIMITS, ...limits };
  scanMessagePack(bytes, effective);
  try {
    return decoderFor(effective).decode(bytes);
  } catch (err) {
    throw new SessionmuxError("bad_frame", `undecodable MessagePack: ${(err as Error).message}`, {
      cause: err,
    });
  }
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

function badFrame(reason: string, at: number): never {
  throw new SessionmuxError("bad_frame", `${reason} at byte ${at}`, { data: { offset: at } });
}

/**
 * Validates the structure of one MessagePack value filling `bytes` exactly. Each open container
 * is one slot of `left` (items still expected; a map of n entries expects 2n, keys at even counts).
 */
function scanMessagePack(bytes: Uint8Array, limits: DecodeLimits): void {
  const end = bytes.length;
  if (end === 0) badFrame("empty frame", 0);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const left: number[] = [];
  const isMap: boolean[] = [];
  let pos = 0;
  const need = (n: number) => {
    if (pos + n > end) badFrame("truncated MessagePack", pos);
  };
  for (;;) {
    const depth = left.length;
    const expectingKey = depth > 0 && isMap[depth - 1] === true && (left[depth - 1] ?? 0) % 2 === 0;
    need(1);
    const start = pos;
    const b = bytes[pos++] as number;
    let container = -1; // item count of a container opened here
    let containerIsMap = false;
    let strLen = -1;
    if (expectingKey && !(b >= 0xa0 && b <= 0xbf) && b !== 0xd9 && b !== 0xda && b !== 0xdb) {
      badFrame("map keys must be strings", start);
    }
    if (b <= 0x7f || b >= 0xe0) {
      // fixint
    } else if (b <= 0x8f) {
      container = (b & 0x0f) * 2;
      containerIsMap = true;
    } else if (b <= 0x9f) {
      container = b & 0x0f;
    } else if (b <= 0xbf) {
      strLen = b & 0x1f;
    } else {
      switch (b) {
        case 0xc0:
        case 0xc2:
        case 0xc3:
          break;
        case 0xc4:
        case 0xc5:
        case 0xc6: {
          const width = b === 0xc4 ? 1 : b === 0xc5 ? 2 : 4;
          need(width);
          const len = readUint(view, pos, width);
          pos += width;
          if (len > limits.maxBinBytes) badFrame(`binary of ${len} bytes over the limit`, start);
          need(len);
          pos += len;
          break;
        }
        case 0xca:
          need(4);
          pos += 4;
          break;
        case 0xcb:
          need(8);
          pos += 8;
          break;
        case 0xcc:
        case 0xd0:
          need(1);
          pos += 1;
          break;
        case 0xcd:
        case 0xd1:
          need(2);
          pos += 2;
          break;
        case 0xce:
        case 0xd2:
          need(4);
          pos += 4;
          break;
        case 0xcf:
        case 0xd3:
          need(8);
          pos += 8;
          break;
        case 0xd9:
        case 0xda:
        case 0xdb: {
          const width = b === 0xd9 ? 1 : b === 0xda ? 2 : 4;
          need(width);
          strLen = readUint(view, pos, width);
          pos += width;
          break;
        }
        case 0xdc:
        case 0xdd: {
          const width = b === 0xdc ? 2 : 4;
          need(width);
          container = readUint(view, pos, width);
          pos += width;
          break;
        }
        case 0xde:
        case 0xdf: {
          const width = b === 0xde ? 2 : 4;
          need(width);
          container = readUint(view, pos, width) * 2;
          containerIsMap = true;
          pos += width;
          break;
        }
        default:
          // 0xc1 (never used), 0xc7–0xc9 and 0xd4–0xd8 (extension types)
          badFrame(b === 0xc1 ? "reserved type byte 0xc1" : "extension types are not accepted", start);
      }
    }
    if (strLen >= 0) {
      if (strLen > limits.maxStrBytes) badFrame(`string of ${strLen} bytes over the limit`, start);
      need(strLen);
      if (!isValidUtf8(bytes, pos, pos + strLen)) badFrame("invalid UTF-8", pos);
      if (
        expectingKey &&
        strLen <= LONGEST_FORBIDDEN_KEY &&
        FORBIDDEN_KEYS.has(asciiOf(bytes, pos, strLen))
      ) {
        badFrame("forbidden map key", start);
      }
      pos += strLen;
    }
    if (depth > 0) left[depth - 1] = (left[depth - 1] as number) - 1;
    if (container >= 0) {
      if (containerIsMap && container / 2 > limits.maxMapLength)
        badFrame(`map of ${container / 2} entries over the limit`, start);
      if (!containerIsMap && container > limits.maxArrayLength)
        badFrame(`array of ${container} items over the limit`, start);
      if (depth + 1 > limits.maxDepth) badFrame(`nesting deeper than ${limits.maxDepth}`, start);
      if (container > 0) {
        left.push(container);
        isMap.push(containerIsMap);
        continue;
      }
    }
    while (left.length > 0 && left[left.length - 1] === 0) {
      left.pop();
      isMap.pop();
    }
    if (left.length === 0) break;
  }
  if (pos !== end) badFrame(`${end - pos} trailing bytes`, pos);
}

function readUint(view: DataView, pos: number, width: number): number {
  return width === 1 ? view.getUint8(pos) : width === 2 ? view.getUint16(pos) : view.getUint32(pos);
}

function asciiOf(bytes: Uint8Array, pos: number, len: number): string {
  let s = "";
  for (let i = pos; i < pos + len; i++) s += String.fromCharCode(bytes[i] as number);
  return s;
}

/** Strict UTF-8 (RFC 3629): no overlongs, no surrogates, nothing above U+10FFFF. */
function isValidUtf8(bytes: Uint8Array, from: number, to: number): boolean {
  let i = from;
  while (i < to) {
    const b0 = bytes[i] as number;
    if (b0 < 0x80) {
      i++;
      continue;
    }
    if (b0 >= 0xc2 && b0 <= 0xdf) {
      if (i + 1 >= to || !isCont(bytes[i + 1])) return false;
      i += 2;
    } else if (b0 >= 0xe0 && b0 <= 0xef) {
      if (i + 2 >= to) return false;
      const b1 = bytes[i + 1] as number;
      if (b0 === 0xe0 && b1 < 0xa0) return false; // overlong
      if (b0 === 0xed && b1 > 0x9f) return false; // surrogate
      if (!isCont(b1) || !isCont(bytes[i + 2])) return false;
      i += 3;
    } else if (b0 >= 0xf0 && b0 <= 0xf4) {
      if (i + 3 >= to) return false;
      const b1 = bytes[i + 1] as number;
      if (b0 === 0xf0 && b1 < 0x90) return false; // overlong
      if (b0 === 0xf4 && b1 > 0x8f) return false; // above U+10FFFF
      if (!isCont(b1) || !isCont(bytes[i + 2]) || !isCont(bytes[i + 3])) return false;
      i += 4;
    } else {
      return false;
    }
  }
  return true;
}

function isCont(b: number | undefined): boolean {
  return b !== undefined && (b & 0xc0) === 0x80;
}
