import type { DecodeLimits } from "./codec.js";
import { SessionmuxError } from "./errors.js";
import {
  ARRAY,
  BINARY,
  EXTENSION,
  LENGTH_FIELD_BYTES,
  MAP,
  RESERVED,
  SCALAR,
  STRING,
  TYPE_BYTE_KIND,
  TYPE_BYTE_LENGTH,
} from "./msgpack-type-bytes.js";
import { isValidUtf8 } from "./utf8.js";

/**
 * The structural scanner in front of the MessagePack decoder (protocol-v1 §2, §7): it walks
 * untrusted bytes and enforces every limit without building values and without recursion (so
 * 10,000-deep nesting costs a counter, not a stack).
 */

/**
 * Keys that could reach an object's prototype chain in careless consumers, as bytes: every key of
 * every frame is compared without building a string of it.
 */
const FORBIDDEN_KEYS = ["__proto__", "constructor", "prototype"].map((key) => new TextEncoder().encode(key));

/** What one type byte opens (`Scanner.head`): binaries are skipped whole, as scalars. */
type Head = typeof SCALAR | typeof STRING | typeof ARRAY | typeof MAP;

function badFrame(reason: string, at: number): never {
  throw new SessionmuxError("bad_frame", `${reason} at byte ${at}`, { data: { offset: at } });
}

/**
 * Validates the structure of one MessagePack value filling `bytes` exactly. Each open container
 * is one slot of `left` (items still expected; a map of n entries expects 2n, keys at even counts).
 * `values` counts the frame's values as its containers announce them, so a frame announcing more
 * than its limit is refused at that container's head, before any of them is read.
 */
export function scanMessagePack(bytes: Uint8Array, limits: DecodeLimits): void {
  if (bytes.length === 0) badFrame("empty frame", 0);
  const scan = new Scanner(bytes, limits);
  const left: number[] = [];
  const isMap: boolean[] = [];
  let values = 1;
  for (;;) {
    const depth = left.length;
    const expectingKey = depth > 0 && isMap[depth - 1] === true && (left[depth - 1] ?? 0) % 2 === 0;
    const start = scan.pos;
    const head = scan.head(expectingKey);
    if (head === STRING) scan.string(start, expectingKey);
    if (depth > 0) left[depth - 1] = (left[depth - 1] as number) - 1;
    if (head === ARRAY || head === MAP) {
      const items = scan.length;
      checkContainer(head, items, depth + 1, limits, start);
      values += items;
      if (values > limits.maxValues) badFrame(`more than ${limits.maxValues} values`, start);
      if (items > 0) {
        left.push(items);
        isMap.push(head === MAP);
        continue;
      }
    }
    while (left.length > 0 && left[left.length - 1] === 0) {
      left.pop();
      isMap.pop();
    }
    if (left.length === 0) break;
  }
  if (scan.pos !== bytes.length) badFrame(`${bytes.length - scan.pos} trailing bytes`, scan.pos);
}

function checkContainer(head: Head, items: number, depth: number, limits: DecodeLimits, start: number): void {
  if (head === MAP && items / 2 > limits.maxMapLength)
    badFrame(`map of ${items / 2} entries over the limit`, start);
  if (head === ARRAY && items > limits.maxArrayLength)
    badFrame(`array of ${items} items over the limit`, start);
  if (depth > limits.maxDepth) badFrame(`nesting deeper than ${limits.maxDepth}`, start);
}

/** A read position in the frame; `length` is what the last `head` opened (string bytes, or items). */
class Scanner {
  pos = 0;
  length = 0;
  readonly #view: DataView;

  constructor(
    readonly bytes: Uint8Array,
    readonly limits: DecodeLimits,
  ) {
    this.#view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  /** Reads one type byte and its length field; scalars and binaries are skipped whole. */
  head(expectingKey: boolean): Head {
    const start = this.pos;
    const b = this.#uint(1);
    const kind = TYPE_BYTE_KIND[b];
    if (expectingKey && kind !== STRING) badFrame("map keys must be strings", start);
    if (kind === RESERVED) badFrame("reserved type byte 0xc1", start);
    if (kind === EXTENSION) badFrame("extension types are not accepted", start);
    const field = LENGTH_FIELD_BYTES[b]!;
    const length = field === 0 ? TYPE_BYTE_LENGTH[b]! : this.#uint(field);
    switch (kind) {
      case STRING:
      case ARRAY:
        return this.#opens(kind, length);
      case MAP:
        return this.#opens(MAP, length * 2);
      case BINARY:
        if (length > this.limits.maxBinBytes) badFrame(`binary of ${length} bytes over the limit`, start);
        this.#skip(length);
        return SCALAR;
      default:
        this.#skip(length);
        return SCALAR;
    }
  }

  /** The string `head` opened: within the limit, strict UTF-8, and never a forbidden map key. */
  string(start: number, isKey: boolean): void {
    const { bytes, pos, length } = this;
    if (length > this.limits.maxStrBytes) badFrame(`string of ${length} bytes over the limit`, start);
    this.#need(length);
    if (!isValidUtf8(bytes, pos, pos + length)) badFrame("invalid UTF-8", pos);
    if (isKey && isForbiddenKey(bytes, pos, length)) badFrame("forbidden map key", start);
    this.pos += length;
  }

  #opens(head: Head, length: number): Head {
    this.length = length;
    return head;
  }

  #need(n: number): void {
    if (this.pos + n > this.bytes.length) badFrame("truncated MessagePack", this.pos);
  }

  #skip(n: number): void {
    this.#need(n);
    this.pos += n;
  }

  #uint(width: number): number {
    this.#need(width);
    const view = this.#view;
    const pos = this.pos;
    this.pos += width;
    return width === 1 ? view.getUint8(pos) : width === 2 ? view.getUint16(pos) : view.getUint32(pos);
  }
}

function isForbiddenKey(bytes: Uint8Array, pos: number, length: number): boolean {
  for (const key of FORBIDDEN_KEYS) {
    if (key.length !== length) continue;
    let same = true;
    for (let i = 0; i < length && same; i++) same = bytes[pos + i] === key[i];
    if (same) return true;
  }
  return false;
}
