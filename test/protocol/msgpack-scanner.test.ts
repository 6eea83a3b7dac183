import { encode } from "@msgpack/msgpack";
import { describe, expect, it } from "vitest";
import { DEFAULT_DECODE_LIMITS, type DecodeLimits } from "../../protocol/codec.js";
import { SessionmuxError } from "../../protocol/index.js";
import { scanMessagePack } from "../../protocol/msgpack-scanner.js";

/**
 * The scanner alone, before any decoder: `decodeFrame` hands its input to `@msgpack/msgpack`
 * afterwards, whose own checks would hide a scanner that let a frame through (every refusal is
 * `bad_frame` either way). What only the scanner gives is pinned here: it refuses without
 * building a value, and it names what it refused and where.
 */

const bytes = (...parts: (number | readonly number[] | Uint8Array)[]) =>
  Uint8Array.from(parts.flatMap((p) => (typeof p === "number" ? [p] : Array.from(p))));

const utf8 = (s: string) => new TextEncoder().encode(s);
/** A fixstr (at most 31 bytes). */
const str = (s: string) => bytes(0xa0 | utf8(s).length, utf8(s));

function scan(input: Uint8Array, limits: Partial<DecodeLimits> = {}): void {
  scanMessagePack(input, { ...DEFAULT_DECODE_LIMITS, ...limits });
}

/** The refusal's message and the offset it carries; fails the test when the scan passes. */
function refusal(
  input: Uint8Array,
  limits: Partial<DecodeLimits> = {},
): { message: string; offset: unknown } {
  try {
    scan(input, limits);
  } catch (err) {
    if (!(err instanceof SessionmuxError)) throw err;
    expect(err.code).toBe("bad_frame");
    return { message: err.message, offset: (err.data as { offset?: unknown } | undefined)?.offset };
  }
  throw new Error("the scan passed");
}

describe("scanMessagePack accepts every MessagePack type but extensions", () => {
  const values: [string, unknown][] = [
    ["positive fixint", 0x7f],
    ["negative fixint", -32],
    ["nil", null],
    ["false", false],
    ["true", true],
    ["float64", 1.5],
    ["uint8", 0xff],
    ["uint16", 0xffff],
    ["uint32", 0xffff_ffff],
    ["uint64", 2 ** 53 - 1],
    ["int8", -0x80],
    ["int16", -0x8000],
    ["int32", -0x8000_0000],
    ["int64", -(2 ** 53 - 1)],
    ["fixstr", "a".repeat(31)],
    ["str8", "a".repeat(0xff)],
    ["str16", "a".repeat(0x100)],
    ["bin8", new Uint8Array(0xff)],
    ["bin16", new Uint8Array(0x100)],
    ["bin32", new Uint8Array(0x1_0000)],
    ["fixarray", [1, [2, []], {}]],
    ["fixarray of 15 items (0x9f)", new Array(15).fill(1)],
    ["array16", new Array(16).fill(1)],
    ["fixmap", { a: 1, b: { c: [] }, d: {} }],
    ["fixmap of 15 entries (0x8f)", Object.fromEntries(Array.from({ length: 15 }, (_, i) => [`k${i}`, i]))],
    ["map16", Object.fromEntries(Array.from({ length: 16 }, (_, i) => [`k${i}`, i]))],
    ["a map in a map's value, then more keys", { a: { b: { c: 1 } }, d: 2, e: [3, { f: 4 }] }],
  ];
  for (const [name, value] of values) {
    it(name, () => {
      expect(() => scan(encode(value))).not.toThrow();
    });
  }

  it("float32, str32, array32 and map32 (which the encoder never writes)", () => {
    expect(() => scan(bytes(0xca, 0x3f, 0xc0, 0, 0))).not.toThrow();
    expect(() => scan(bytes(0xdb, 0, 0, 0, 2, 0x68, 0x69))).not.toThrow();
    expect(() => scan(bytes(0xdd, 0, 0, 0, 2, 0x01, 0xc0))).not.toThrow();
    expect(() => scan(bytes(0xdf, 0, 0, 0, 1, str("k"), 0x01))).not.toThrow();
  });

  it("map keys in every string form", () => {
    expect(() => scan(bytes(0x81, 0xd9, 1, 0x6b, 0x01))).not.toThrow();
    expect(() => scan(bytes(0x81, 0xda, 0, 1, 0x6b, 0x01))).not.toThrow();
    expect(() => scan(bytes(0x81, 0xdb, 0, 0, 0, 1, 0x6b, 0x01))).not.toThrow();
    expect(() => scan(bytes(0x81, 0xa0, 0x01))).not.toThrow();
    expect(() => scan(bytes(0x81, 0xbf, new Array(31).fill(0x6b), 0x01))).not.toThrow();
  });

  it("values that are not keys may be anything, forbidden key names included", () => {
    expect(() => scan(encode({ a: "__proto__", b: ["constructor", "prototype"] }))).not.toThrow();
    expect(() => scan(encode({ __prot__: 1, constructors: 2, prototypf: 3, Prototype: 4 }))).not.toThrow();
  });
});

describe("scanMessagePack reads each length field at its width", () => {
  // A wrong width reads another length, so the frame ends early or late.
  const cases: [string, Uint8Array][] = [
    ["str8", bytes(0xd9, 2, 0x68, 0x69)],
    ["str16", bytes(0xda, 0, 2, 0x68, 0x69)],
    ["str32", bytes(0xdb, 0, 0, 0, 2, 0x68, 0x69)],
    ["bin8", bytes(0xc4, 2, 0, 0)],
    ["bin16", bytes(0xc5, 0, 2, 0, 0)],
    ["bin32", bytes(0xc6, 0, 0, 0, 2, 0, 0)],
    ["array16", bytes(0xdc, 0, 2, 0x01, 0x02)],
    ["array32", bytes(0xdd, 0, 0, 0, 2, 0x01, 0x02)],
    ["map16", bytes(0xde, 0, 1, str("k"), 0x01)],
    ["map32", bytes(0xdf, 0, 0, 0, 1, str("k"), 0x01)],
    ["float32", bytes(0xca, 0, 0, 0, 0)],
    ["float64", bytes(0xcb, 0, 0, 0, 0, 0, 0, 0, 0)],
    ["uint8", bytes(0xcc, 0)],
    ["uint16", bytes(0xcd, 0, 0)],
    ["uint32", bytes(0xce, 0, 0, 0, 0)],
    ["uint64", bytes(0xcf, 0, 0, 0, 0, 0, 0, 0, 0)],
    ["int8", bytes(0xd0, 0)],
    ["int16", bytes(0xd1, 0, 0)],
    ["int32", bytes(0xd2, 0, 0, 0, 0)],
    ["int64", bytes(0xd3, 0, 0, 0, 0, 0, 0, 0, 0)],
  ];
  for (const [name, input] of cases) {
    it(`${name}: whole passes, one byte short is truncated, one byte more trails`, () => {
      expect(() => scan(input)).not.toThrow();
      const last = input.length - 1;
      expect(refusal(input.subarray(0, last))).toEqual({
        message: expect.stringMatching(/^truncated MessagePack at byte \d+$/),
        offset: expect.any(Number),
      });
      expect(refusal(bytes(input, 0xc0))).toEqual({
        message: `1 trailing bytes at byte ${input.length}`,
        offset: input.length,
      });
    });
  }

  it("a truncated frame is refused where its bytes ran out", () => {
    expect(refusal(bytes(0x92, 0x01))).toEqual({ message: "truncated MessagePack at byte 2", offset: 2 });
    expect(refusal(bytes(0xa3, 0x61))).toEqual({ message: "truncated MessagePack at byte 1", offset: 1 });
    expect(refusal(bytes(0xcd, 0x01))).toEqual({ message: "truncated MessagePack at byte 1", offset: 1 });
    expect(refusal(bytes(0xc5, 0, 4, 0))).toEqual({ message: "truncated MessagePack at byte 3", offset: 3 });
  });
});

describe("scanMessagePack refuses, naming what and where", () => {
  it("an empty frame", () => {
    expect(refusal(bytes())).toEqual({ message: "empty frame at byte 0", offset: 0 });
  });

  it("trailing bytes, counted", () => {
    expect(refusal(bytes(0x80, 0x01, 0x02, 0x03))).toEqual({
      message: "3 trailing bytes at byte 1",
      offset: 1,
    });
  });

  it("a map key that is not a string, wherever the map is", () => {
    const keyed = [0x01, 0xc0, 0x90, 0x80, 0xc4, 0xcc, 0xcb];
    for (const key of keyed) {
      expect(refusal(bytes(0x81, key, 0x01)).message).toBe("map keys must be strings at byte 1");
    }
    // after a nested map closed, the outer map expects its next key again
    expect(refusal(bytes(0x82, str("a"), 0x81, str("b"), 0x01, 0x05, 0x02))).toEqual({
      message: "map keys must be strings at byte 7",
      offset: 7,
    });
    // after an array value closed too
    expect(refusal(bytes(0x82, str("a"), 0x92, str("b"), 0x01, 0x05, 0x02)).offset).toBe(7);
    // a map inside an array: its keys are checked, the array's items are not
    expect(() => scan(bytes(0x92, 0x01, 0x81, str("k"), 0x02))).not.toThrow();
    expect(refusal(bytes(0x92, 0x01, 0x81, 0x03, 0x02)).offset).toBe(3);
  });

  it("a forbidden key, and only the exact names", () => {
    for (const key of ["__proto__", "constructor", "prototype"]) {
      expect(refusal(bytes(0x82, str("ok"), 0x01, str(key), 0x01))).toEqual({
        message: "forbidden map key at byte 5",
        offset: 5,
      });
    }
    expect(refusal(bytes(0x81, 0xd9, 9, utf8("__proto__"), 0xc0)).offset).toBe(1);
  });

  it("invalid UTF-8, at the string's first byte", () => {
    expect(refusal(bytes(0x92, 0x01, 0xa2, 0xc3, 0x28))).toEqual({
      message: "invalid UTF-8 at byte 3",
      offset: 3,
    });
    expect(refusal(bytes(0x81, 0xa1, 0xff, 0x01))).toEqual({ message: "invalid UTF-8 at byte 2", offset: 2 });
  });

  it("extension types and the reserved byte", () => {
    for (const b of [0xc7, 0xc8, 0xc9, 0xd4, 0xd5, 0xd6, 0xd7, 0xd8]) {
      expect(refusal(bytes(0x91, b, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))).toEqual({
        message: "extension types are not accepted at byte 1",
        offset: 1,
      });
    }
    expect(refusal(bytes(0x91, 0xc1))).toEqual({ message: "reserved type byte 0xc1 at byte 1", offset: 1 });
  });
});

describe("scanMessagePack holds each limit at its edge, before reading what it announced", () => {
  const limits = { maxStrBytes: 4, maxBinBytes: 3, maxArrayLength: 2, maxMapLength: 1, maxDepth: 3 };

  it("strings: the limit passes, one byte more is refused (as a key too)", () => {
    expect(() => scan(bytes(0xa4, utf8("abcd")), limits)).not.toThrow();
    expect(refusal(bytes(0x91, 0xa5, utf8("abcde")), limits)).toEqual({
      message: "string of 5 bytes over the limit at byte 1",
      offset: 1,
    });
    expect(refusal(bytes(0x81, 0xa5, utf8("abcde"), 0x01), limits).message).toBe(
      "string of 5 bytes over the limit at byte 1",
    );
    // announced, not present: refused by its length before the bytes are looked for
    expect(refusal(bytes(0xdb, 0xff, 0xff, 0xff, 0xff), limits).message).toBe(
      "string of 4294967295 bytes over the limit at byte 0",
    );
  });

  it("binaries: the limit passes, one byte more is refused", () => {
    expect(() => scan(bytes(0xc4, 3, 0, 0, 0), limits)).not.toThrow();
    expect(refusal(bytes(0x91, 0xc4, 4, 0, 0, 0, 0), limits)).toEqual({
      message: "binary of 4 bytes over the limit at byte 1",
      offset: 1,
    });
    expect(refusal(bytes(0xc6, 0xff, 0xff, 0xff, 0xff), limits).message).toBe(
      "binary of 4294967295 bytes over the limit at byte 0",
    );
  });

  it("arrays: the limit passes, one item more is refused", () => {
    expect(() => scan(bytes(0x92, 0x01, 0x02), limits)).not.toThrow();
    expect(refusal(bytes(0x91, 0x93, 0x01, 0x02, 0x03), limits)).toEqual({
      message: "array of 3 items over the limit at byte 1",
      offset: 1,
    });
    expect(refusal(bytes(0xdd, 0xff, 0xff, 0xff, 0xff), limits).message).toBe(
      "array of 4294967295 items over the limit at byte 0",
    );
  });

  it("maps: the limit passes, one entry more is refused", () => {
    expect(() => scan(bytes(0x81, str("a"), 0x01), limits)).not.toThrow();
    expect(refusal(bytes(0x91, 0x82, str("a"), 0x01, str("b"), 0x02), limits)).toEqual({
      message: "map of 2 entries over the limit at byte 1",
      offset: 1,
    });
    expect(refusal(bytes(0xdf, 0xff, 0xff, 0xff, 0xff), limits).message).toBe(
      "map of 4294967295 entries over the limit at byte 0",
    );
  });

  it("a map's entries are held to the map limit only, an array's items to the array limit only", () => {
    expect(() =>
      scan(bytes(0x82, str("a"), 0x01, str("b"), 0x02), { maxMapLength: 2, maxArrayLength: 1 }),
    ).not.toThrow();
    expect(() => scan(bytes(0x92, 0x01, 0x02), { maxMapLength: 1, maxArrayLength: 2 })).not.toThrow();
  });

  it("depth: the limit passes, one level more is refused; empty containers count as levels", () => {
    expect(() => scan(bytes(0x91, 0x91, 0x91, 0xc0), limits)).not.toThrow();
    expect(() => scan(bytes(0x91, 0x91, 0x90), limits)).not.toThrow();
    expect(refusal(bytes(0x91, 0x91, 0x91, 0x90), limits)).toEqual({
      message: "nesting deeper than 3 at byte 3",
      offset: 3,
    });
    expect(refusal(bytes(0x91, 0x81, str("k"), 0x91, 0x80), limits).message).toBe(
      "nesting deeper than 3 at byte 5",
    );
    // depth is where a container sits, not how many came before it
    expect(() =>
      scan(bytes(0x93, 0x91, 0x90, 0x91, 0x90, 0x91, 0x90), { ...limits, maxArrayLength: 3 }),
    ).not.toThrow();
  });

  it("values: the limit passes, one more is refused where a container announces it; keys and containers count", () => {
    const fewValues = { maxValues: 5 };
    // [1, {a: [2]}]: the array, 1, the map, "a", [2], 2
    expect(() => scan(bytes(0x92, 0x01, 0x81, str("a"), 0x91, 0x02), { maxValues: 6 })).not.toThrow();
    expect(refusal(bytes(0x92, 0x01, 0x81, str("a"), 0x91, 0x02), fewValues)).toEqual({
      message: "more than 5 values at byte 5",
      offset: 5,
    });
    // a map of 2 entries announces 4 values with itself: refused at its head, not after its entries
    expect(refusal(bytes(0x91, 0x82, str("a"), 0x01, str("b"), 0x02), { maxValues: 5 }).message).toBe(
      "more than 5 values at byte 1",
    );
    // announced, not present: refused before the items are looked for
    expect(refusal(bytes(0x91, 0xdc, 0xff, 0xff), { maxArrayLength: 1_000_000 }).message).toBe(
      `more than ${DEFAULT_DECODE_LIMITS.maxValues} values at byte 1`,
    );
    // the value limit holds across containers each within its own limit
    const arrays = bytes(0x92, ...[0, 1].flatMap(() => [0xdc, 0x08, 0x00, ...new Array(2_048).fill(0x01)]));
    expect(refusal(arrays).message).toBe(`more than ${DEFAULT_DECODE_LIMITS.maxValues} values at byte 2052`);
  });
});
