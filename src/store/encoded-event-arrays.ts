import { Limits } from "../../protocol/limits.js";

/**
 * Event rows as MessagePack arrays of `{seq, at, type, data}` maps, written straight from the
 * stored columns: `data` is already MessagePack in the log, so its bytes are spliced in as they
 * are and a replay (or a live push of a commit) never encodes an event's data again. Decoding an
 * array gives exactly what `decodeRow` gives for the same rows.
 *
 * `data` is the stored MessagePack, as hex text (how a query returns it) or as the bytes.
 */
export type EncodedRow = [seq: number, at: number, type: string, data: string | Uint8Array];

const KEY_SEQ = fixstr("seq");
const KEY_AT = fixstr("at");
const KEY_TYPE = fixstr("type");
const KEY_DATA = fixstr("data");
const FIXMAP_4 = 0x84;
const EMPTY = new Uint8Array(0);
/** Event types repeat endlessly; their encoded strings are kept. */
const typeCache = new Map<string, Buffer>();
const TYPE_CACHE_MAX = 256;

/** Map header, four keys and two numbers of at most 9 bytes each: an event's bytes besides type and data. */
const EVENT_OVERHEAD = 1 + KEY_SEQ.length + KEY_AT.length + KEY_TYPE.length + KEY_DATA.length + 18;

/**
 * Splits `rows` into arrays of at most `perArray` events, each closed once it holds `maxBytes` of
 * event data (so an array stays under that plus one event), each preceded by `envelope` (bytes a
 * caller would otherwise copy the array behind); an empty input gives no arrays. All arrays are
 * views of one allocation.
 */
export function encodeEventArrays(
  rows: readonly EncodedRow[],
  perArray: number,
  envelope: Uint8Array = EMPTY,
  maxBytes: number = Limits.eventItemBytes,
): Uint8Array[] {
  const ends = arrayEnds(rows, Math.max(1, Math.floor(perArray)), maxBytes);
  let size = 0;
  let start = 0;
  for (const end of ends) {
    size += envelope.length + arrayHeaderSize(end - start);
    start = end;
  }
  for (const [, , type, data] of rows) size += EVENT_OVERHEAD + encodedType(type).length + dataBytes(data);
  const out = Buffer.allocUnsafe(size);
  const arrays: Uint8Array[] = [];
  let pos = 0;
  start = 0;
  for (const end of ends) {
    const from = pos;
    out.set(envelope, pos);
    pos = writeEventArray(out, pos + envelope.length, rows, start, end);
    arrays.push(out.subarray(from, pos));
    start = end;
  }
  return arrays;
}

/**
 * The event data after which a read of up to `limit` events in arrays of `perArray` stops: what
 * its arrays hold at most when they are closed by bytes, so large events make a read shorter in
 * events, never larger in bytes (it may pass this by one event).
 */
export function readBudget(limit: number, perArray: number): number {
  return Math.ceil(limit / Math.max(1, Math.floor(perArray))) * Limits.eventItemBytes;
}

/** Where each array ends (exclusive): after `step` rows, or once its rows' data reach `maxBytes`. */
function arrayEnds(rows: readonly EncodedRow[], step: number, maxBytes: number): number[] {
  const ends: number[] = [];
  let count = 0;
  let bytes = 0;
  for (let i = 0; i < rows.length; i++) {
    count++;
    bytes += dataBytes(rows[i]![3]);
    if (count === step || bytes >= maxBytes) {
      ends.push(i + 1);
      count = 0;
      bytes = 0;
    }
  }
  if (count > 0) ends.push(rows.length);
  return ends;
}

function writeEventArray(
  out: Buffer,
  at: number,
  rows: readonly EncodedRow[],
  start: number,
  end: number,
): number {
  let pos = writeArrayHeader(out, at, end - start);
  for (let i = start; i < end; i++) {
    const [seq, at, type, data] = rows[i]!;
    out[pos++] = FIXMAP_4;
    pos = writeNumber(out, putSmall(out, pos, KEY_SEQ), seq);
    pos = writeNumber(out, putSmall(out, pos, KEY_AT), at);
    pos = putSmall(out, pos, KEY_TYPE);
    const typeBytes = encodedType(type);
    pos =
      typeBytes.length <= SMALL_COPY_BYTES ? putSmall(out, pos, typeBytes) : putBytes(out, pos, typeBytes);
    pos = putSmall(out, pos, KEY_DATA);
    if (typeof data === "string") pos += out.write(data, pos, "hex");
    else {
      out.set(data, pos);
      pos += data.length;
    }
  }
  return pos;
}

/**
 * The keys and an event's type are a few bytes each, written for every event a commit sends: a
 * loop copies them for a fraction of what a call of TypedArray#set (or Buffer#copy) costs at this
 * size, where the call's checks and dispatch outweigh the copy.
 */
const SMALL_COPY_BYTES = 32;

function putSmall(out: Buffer, pos: number, bytes: Uint8Array): number {
  const n = bytes.length;
  for (let i = 0; i < n; i++) out[pos + i] = bytes[i]!;
  return pos + n;
}

function putBytes(out: Buffer, pos: number, bytes: Uint8Array): number {
  out.set(bytes, pos);
  return pos + bytes.length;
}

function dataBytes(data: string | Uint8Array): number {
  return typeof data === "string" ? data.length / 2 : data.length;
}

/** Bytes of the MessagePack header of an array of `length` elements. */
export function arrayHeaderSize(length: number): number {
  return length < 16 ? 1 : length < 0x10000 ? 3 : 5;
}

/** The MessagePack header of an array of `length` elements. */
export function arrayHeader(length: number): Buffer {
  const out = Buffer.allocUnsafe(arrayHeaderSize(length));
  writeArrayHeader(out, 0, length);
  return out;
}

function writeArrayHeader(out: Buffer, pos: number, length: number): number {
  if (length < 16) {
    out[pos] = 0x90 | length;
    return pos + 1;
  }
  if (length < 0x10000) {
    out[pos] = 0xdc;
    out.writeUInt16BE(length, pos + 1);
    return pos + 3;
  }
  out[pos] = 0xdd;
  out.writeUInt32BE(length, pos + 1);
  return pos + 5;
}

/** Integers in their shortest MessagePack form (as `@msgpack/msgpack` writes them), else float64. */
function writeNumber(out: Buffer, pos: number, value: number): number {
  if (!Number.isSafeInteger(value)) {
    out[pos] = 0xcb;
    out.writeDoubleBE(value, pos + 1);
    return pos + 9;
  }
  if (value >= 0) {
    if (value < 0x80) {
      out[pos] = value;
      return pos + 1;
    }
    if (value < 0x100) {
      out[pos] = 0xcc;
      out[pos + 1] = value;
      return pos + 2;
    }
    if (value < 0x10000) {
      out[pos] = 0xcd;
      out.writeUInt16BE(value, pos + 1);
      return pos + 3;
    }
    if (value < 0x100000000) {
      out[pos] = 0xce;
      out.writeUInt32BE(value, pos + 1);
      return pos + 5;
    }
    out[pos] = 0xcf;
    out.writeUInt32BE(Math.floor(value / 0x100000000), pos + 1);
    out.writeUInt32BE(value % 0x100000000, pos + 5);
    return pos + 9;
  }
  if (value >= -32) {
    out[pos] = value & 0xff;
    return pos + 1;
  }
  if (value >= -0x80) {
    out[pos] = 0xd0;
    out.writeInt8(value, pos + 1);
    return pos + 2;
  }
  if (value >= -0x8000) {
    out[pos] = 0xd1;
    out.writeInt16BE(value, pos + 1);
    return pos + 3;
  }
  if (value >= -0x80000000) {
    out[pos] = 0xd2;
    out.writeInt32BE(value, pos + 1);
    return pos + 5;
  }
  out[pos] = 0xd3;
  out.writeBigInt64BE(BigInt(value), pos + 1);
  return pos + 9;
}

function encodedType(type: string): Buffer {
  let bytes = typeCache.get(type);
  if (bytes === undefined) {
    bytes = encodeStr(type);
    if (typeCache.size < TYPE_CACHE_MAX) typeCache.set(type, bytes);
  }
  return bytes;
}

function encodeStr(value: string): Buffer {
  const utf8 = Buffer.from(value, "utf8");
  const n = utf8.length;
  const head =
    n < 32
      ? Buffer.of(0xa0 | n)
      : n < 0x100
        ? Buffer.of(0xd9, n)
        : n < 0x10000
          ? Buffer.of(0xda, n >> 8, n & 0xff)
          : Buffer.of(0xdb, n >>> 24, (n >> 16) & 0xff, (n >> 8) & 0xff, n & 0xff);
  return Buffer.concat([head, utf8]);
}

function fixstr(ascii: string): Buffer {
  return encodeStr(ascii);
}
