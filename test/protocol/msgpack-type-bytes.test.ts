import { Decoder, ExtData } from "@msgpack/msgpack";
import { describe, expect, it } from "vitest";
import * as typeBytes from "../../protocol/msgpack-type-bytes.js";

/** A field of `width` bytes holding `n`, big-endian. */
const field = (width: number, n: number) =>
  Array.from({ length: width }, (_, i) => (n >>> (8 * (width - 1 - i))) & 0xff);

/**
 * The smallest whole value a type byte opens, as the table reads it: a length field of 2 where it
 * has one (so a field read at the wrong width or place shows), then that many bytes or items.
 */
function smallestValue(b: number): number[] {
  const width = typeBytes.LENGTH_FIELD_BYTES[b]!;
  const length = width === 0 ? typeBytes.TYPE_BYTE_LENGTH[b]! : 2;
  const head = [b, ...field(width, length)];
  switch (typeBytes.TYPE_BYTE_KIND[b]) {
    case typeBytes.ARRAY:
      return [...head, ...new Array(length).fill(0x07)];
    case typeBytes.MAP:
      return [...head, ...new Array(length * 2).fill(0x07)];
    case typeBytes.EXTENSION:
      return [...head, 0x01, ...new Array(length).fill(0)];
    case typeBytes.STRING:
      return [...head, ...new Array(length).fill(0x61)];
    default:
      return [...head, ...new Array(length).fill(0)];
  }
}

describe("the MessagePack type byte table", () => {
  it("reads each of the 256 type bytes' values as the reference decoder does: kind and end", () => {
    // @msgpack/msgpack refuses a value with bytes after it, and one that ends early
    const decoder = new Decoder({ useBigInt64: true });
    const kindOf = (value: unknown) =>
      typeof value === "string"
        ? typeBytes.STRING
        : value instanceof Uint8Array
          ? typeBytes.BINARY
          : value instanceof ExtData
            ? typeBytes.EXTENSION
            : Array.isArray(value)
              ? typeBytes.ARRAY
              : value !== null && typeof value === "object"
                ? typeBytes.MAP
                : typeBytes.SCALAR;
    for (let b = 0; b < 256; b++) {
      if (typeBytes.TYPE_BYTE_KIND[b] === typeBytes.RESERVED) continue;
      const value = decoder.decode(Uint8Array.from(smallestValue(b)));
      expect(kindOf(value), `type byte 0x${b.toString(16)}`).toBe(typeBytes.TYPE_BYTE_KIND[b]);
    }
  });

  it("holds 0xc1 alone as reserved, as the reference decoder does", () => {
    const reserved = [...Array(256).keys()].filter((b) => typeBytes.TYPE_BYTE_KIND[b] === typeBytes.RESERVED);
    expect(reserved).toEqual([0xc1]);
    expect(() => new Decoder().decode(Uint8Array.of(0xc1))).toThrow();
  });
});
