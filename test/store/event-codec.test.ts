import { describe, expect, it } from "vitest";
import { encodeFrame } from "../../protocol/codec.js";
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
});
