/**
 * What each MessagePack type byte opens and where its length is: the one statement of the format's
 * heads for every walk over MessagePack by type bytes and length fields, without building values
 * (the decoder's structural scanner, and the host's search for the end of a value it encoded).
 * Tables of 256 entries, one look-up a type byte, so a walk allocates nothing.
 */

/** Nil, a boolean or a number: `length` bytes after the type byte. */
export const SCALAR = 0;
/** `length` bytes of UTF-8. */
export const STRING = 1;
/** `length` bytes. */
export const BINARY = 2;
/** An extension's own type byte, then `length` bytes. */
export const EXTENSION = 3;
/** `length` values. */
export const ARRAY = 4;
/** `length` entries: twice as many values, keys first. */
export const MAP = 5;
/** 0xc1, which the format never uses. */
export const RESERVED = 6;

const kinds = new Uint8Array(256).fill(RESERVED);
const lengthFields = new Uint8Array(256);
const lengths = new Uint8Array(256);

/** The kind of value each type byte opens (`SCALAR` … `RESERVED`). */
export const TYPE_BYTE_KIND: Readonly<Uint8Array> = kinds;
/**
 * Bytes of the big-endian unsigned length field after the type byte (1, 2 or 4); 0 where the type
 * byte alone gives the length (`TYPE_BYTE_LENGTH`).
 */
export const LENGTH_FIELD_BYTES: Readonly<Uint8Array> = lengthFields;
/** The length a type byte gives by itself, where it has no length field. */
export const TYPE_BYTE_LENGTH: Readonly<Uint8Array> = lengths;

/** Type bytes from `first` on whose lengths are in the type byte: one a length. */
function withLengths(first: number, kind: number, byteLengths: readonly number[]): void {
  byteLengths.forEach((length, i) => {
    kinds[first + i] = kind;
    lengths[first + i] = length;
  });
}

/** Type bytes from `first` on followed by a length field: one a width. */
function withLengthFields(first: number, kind: number, widths: readonly number[]): void {
  widths.forEach((width, i) => {
    kinds[first + i] = kind;
    lengthFields[first + i] = width;
  });
}

/** Type bytes from `first` to `last` with the count in their low bits (`mask`). */
function withCounts(first: number, last: number, kind: number, mask: number): void {
  for (let b = first; b <= last; b++) {
    kinds[b] = kind;
    lengths[b] = b & mask;
  }
}

withCounts(0x00, 0x7f, SCALAR, 0); // positive fixint
withCounts(0x80, 0x8f, MAP, 0x0f); // fixmap
withCounts(0x90, 0x9f, ARRAY, 0x0f); // fixarray
withCounts(0xa0, 0xbf, STRING, 0x1f); // fixstr
withLengths(0xc0, SCALAR, [0]); // nil; 0xc1 stays reserved
withLengths(0xc2, SCALAR, [0, 0]); // false, true
withLengthFields(0xc4, BINARY, [1, 2, 4]); // bin 8, 16, 32
withLengthFields(0xc7, EXTENSION, [1, 2, 4]); // ext 8, 16, 32
withLengths(0xca, SCALAR, [4, 8, 1, 2, 4, 8, 1, 2, 4, 8]); // float 32, 64; uint 8–64; int 8–64
withLengths(0xd4, EXTENSION, [1, 2, 4, 8, 16]); // fixext 1–16
withLengthFields(0xd9, STRING, [1, 2, 4]); // str 8, 16, 32
withLengthFields(0xdc, ARRAY, [2, 4]); // array 16, 32
withLengthFields(0xde, MAP, [2, 4]); // map 16, 32
withCounts(0xe0, 0xff, SCALAR, 0); // negative fixint
