import { describe, expect, it } from "vitest";
import {
  DEFAULT_DECODE_LIMITS,
  type DecodeLimits,
  decodeFrame,
  encodeFrame,
  encodeFrameShared,
} from "../../protocol/codec.js";
import { SessionmuxError } from "../../protocol/errors.js";

/**
 * The frame codec alone (protocol-v1 §2), byte for byte: this file imports nothing that encodes a
 * frame as it loads, so a codec that encodes wrongly fails these tests rather than their import.
 */
const ascii = (s: string) => [0xa0 | s.length, ...Array.from(s, (c) => c.charCodeAt(0))];

// {"type":"call","id":1,"method":"session.list","params":{}} as one MessagePack map
const CALL = Uint8Array.from([
  0x84,
  ...ascii("type"),
  ...ascii("call"),
  ...ascii("id"),
  0x01,
  ...ascii("method"),
  ...ascii("session.list"),
  ...ascii("params"),
  0x80,
]);

describe("encodeFrame", () => {
  it("writes one MessagePack map with the fields in order", () => {
    expect(Array.from(encodeFrame({ type: "call", id: 1, method: "session.list", params: {} }))).toEqual(
      Array.from(CALL),
    );
  });

  it("leaves an undefined field off the wire instead of writing nil", () => {
    expect(Array.from(encodeFrame({ type: "close", id: 2, reason: undefined }))).toEqual([
      0x82,
      ...ascii("type"),
      ...ascii("close"),
      ...ascii("id"),
      0x02,
    ]);
  });

  it("encodeFrameShared writes the same bytes as encodeFrame", () => {
    const value = { type: "item", id: 7, value: { text: "hé", bytes: new Uint8Array([1, 2]) } };
    expect(Array.from(encodeFrameShared(value))).toEqual(Array.from(encodeFrame(value)));
  });
});

describe("decodeFrame", () => {
  it("reads a frame into exactly the value it carries", () => {
    expect(decodeFrame(CALL)).toStrictEqual({ type: "call", id: 1, method: "session.list", params: {} });
  });

  it("round-trips what encodeFrame writes", () => {
    const value = {
      type: "result",
      id: 3,
      result: { n: -1.5, ok: true, none: null, list: ["a", 2], bin: new Uint8Array([0xff]) },
    };
    expect(decodeFrame(encodeFrame(value))).toStrictEqual(value);
  });

  it("refuses a bad frame with a SessionmuxError of code bad_frame", () => {
    let caught: unknown;
    try {
      decodeFrame(Uint8Array.from([0x81, 0x01, 0x02]));
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(SessionmuxError);
    expect(caught).toMatchObject({ code: "bad_frame" });
  });

  it("applies each limits object's own limits, one after the other", () => {
    const frame = encodeFrame({ text: "abcdef" });
    const tight = { maxStrBytes: 5 };
    const loose = { maxStrBytes: 6 };
    expect(() => decodeFrame(frame, tight)).toThrow(SessionmuxError);
    expect(decodeFrame(frame, loose)).toEqual({ text: "abcdef" });
    expect(() => decodeFrame(frame, tight)).toThrow(SessionmuxError);
    expect(decodeFrame(frame)).toEqual({ text: "abcdef" });
  });
});

describe("decodeFrame: a limit left undefined keeps its default", () => {
  const over: Record<keyof DecodeLimits, Uint8Array> = {
    maxStrBytes: encodeFrame("a".repeat(DEFAULT_DECODE_LIMITS.maxStrBytes + 1)),
    maxBinBytes: encodeFrame(new Uint8Array(DEFAULT_DECODE_LIMITS.maxBinBytes + 1)),
    maxArrayLength: encodeFrame(new Array(DEFAULT_DECODE_LIMITS.maxArrayLength + 1).fill(1)),
    maxMapLength: encodeFrame(
      Object.fromEntries(
        Array.from({ length: DEFAULT_DECODE_LIMITS.maxMapLength + 1 }, (_, i) => [`k${i}`, 1]),
      ),
    ),
    maxDepth: Uint8Array.from([...new Array(DEFAULT_DECODE_LIMITS.maxDepth + 1).fill(0x91), 0xc0]),
    // the array and its items: one value over
    maxValues: encodeFrame(new Array(DEFAULT_DECODE_LIMITS.maxValues).fill(1)),
  };
  for (const [key, frame] of Object.entries(over) as [keyof DecodeLimits, Uint8Array][]) {
    // the frames past the array and map limits hold more values than a frame may: only `key` holds them
    const others = key === "maxValues" ? {} : { maxValues: 1_000_000 };
    it(`${key}: undefined is the default, not no limit`, () => {
      expect(() => decodeFrame(frame, others)).toThrow(SessionmuxError);
      expect(() => decodeFrame(frame, { ...others, [key]: undefined })).toThrow(SessionmuxError);
    });
  }
});
