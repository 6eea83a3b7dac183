import { encodeFrame } from "../../../protocol/codec.js";
import type { HostFrame } from "../../../protocol/index.js";

/** Binaries at least this large are sent beside their frame's encoding, never copied into it. */
export const SPLIT_BINARY_BYTES = 64 * 1024;

/** A frame's MessagePack bytes in two parts that, joined, are exactly `encodeFrame(frame)`. */
export interface SplitFrame {
  head: Uint8Array;
  body: Uint8Array;
}

const EMPTY = new Uint8Array(0);

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (value === null || typeof value !== "object") return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/** The last key the encoder writes (it skips undefined values), or undefined for an empty map. */
function lastKey(map: Record<string, unknown>): string | undefined {
  const keys = Object.keys(map);
  for (let i = keys.length - 1; i >= 0; i--) if (map[keys[i]!] !== undefined) return keys[i];
  return undefined;
}

/** `map` with the binary at the end of `path` replaced by an empty one, copying only the path. */
function withEmptyTail(map: Record<string, unknown>, path: readonly string[]): Record<string, unknown> {
  const [key, ...rest] = path as [string, ...string[]];
  const inner = rest.length === 0 ? EMPTY : withEmptyTail(map[key] as Record<string, unknown>, rest);
  return { ...map, [key]: inner };
}

/**
 * When the last value a frame encodes (following the last key of nested maps) is a large binary
 * — an attachment's bytes in a `result` — the frame is encoded with an empty binary there, whose
 * two trailing bytes (`c4 00`) become a bin32 header for the real length: the body is then sent
 * as it is. The shared encoder never copies (nor grows its buffer to) a body of megabytes, which
 * would block the event loop for tens of milliseconds per answer. Null when nothing qualifies.
 */
export function splitTrailingBinary(frame: HostFrame): SplitFrame | null {
  const path: string[] = [];
  let at: unknown = frame;
  while (isPlainObject(at)) {
    const key = lastKey(at);
    if (key === undefined) return null;
    path.push(key);
    at = at[key];
  }
  if (!(at instanceof Uint8Array) || at.byteLength < SPLIT_BINARY_BYTES) return null;
  const encoded = encodeFrame(withEmptyTail(frame as unknown as Record<string, unknown>, path));
  const end = encoded.byteLength - 2;
  if (encoded[end] !== 0xc4 || encoded[end + 1] !== 0x00) return null;
  const head = new Uint8Array(end + 5);
  head.set(encoded.subarray(0, end));
  head[end] = 0xc6;
  new DataView(head.buffer).setUint32(end + 1, at.byteLength);
  return { head, body: at };
}
