import { describe, expect, it } from "vitest";
import { encodeFrame } from "../../protocol/codec.js";
import { Limits } from "../../protocol/limits.js";
import { decodeValue, encodeValue } from "../../src/store/event-codec.js";

const values = [
  { turnId: "t1", text: "a streamed chunk of about the length most deltas have, in one string" },
  { turnId: "t1", text: "ünïcødé and emoji 🙂", skipped: undefined },
  { nested: { list: [1, -2, 3.5, null, true], deeper: { n: 2 ** 40 } } },
  { big: "x".repeat(10_000) },
];

describe("encodeValue", () => {
  it("writes the wire encoder's bytes, which decode to the value", () => {
    for (const value of values) {
      const bytes = encodeValue(value);
      expect(Buffer.from(bytes).equals(Buffer.from(encodeFrame(value)))).toBe(true);
      expect(decodeValue(bytes)).toEqual(value);
    }
  });

  it("returns bytes of their own: later encodings leave them as they were", () => {
    const first = encodeValue(values[0]);
    const kept = Buffer.from(first);
    for (const value of values) encodeValue(value);
    encodeFrame({ other: "frame", padding: "y".repeat(200) });
    expect(Buffer.from(first).equals(kept)).toBe(true);
    expect(decodeValue(first)).toEqual(values[0]);
  });

  it("reads back what it stored past the limits a frame from a peer is held to", () => {
    let deep: unknown = "bottom";
    for (let i = 0; i < Limits.maxDepth + 8; i++) deep = { down: deep };
    const value = {
      text: "t".repeat(Limits.maxStrBytes + 1),
      list: Array.from({ length: Limits.maxArrayLength + 1 }, (_, i) => i),
      map: Object.fromEntries(Array.from({ length: Limits.maxMapLength + 1 }, (_, i) => [`k${i}`, i])),
      deep,
    };
    expect(decodeValue(encodeValue(value))).toEqual(value);
  });
});
