import { Decoder, Encoder } from "@msgpack/msgpack";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  arrayHeader,
  arrayHeaderSize,
  type EncodedRow,
  encodeEventArrays,
} from "../../src/store/encoded-event-arrays.js";
import { wireValue } from "./fixtures/wire-value.js";

const decoder = new Decoder();
const encoder = new Encoder({ ignoreUndefined: true });

describe("encodeEventArrays", () => {
  it("writes any seq, at, type and data the way MessagePack decodes them back", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            seq: fc.oneof(fc.integer(), fc.maxSafeInteger(), fc.double({ noNaN: true })),
            at: fc.oneof(fc.integer({ min: -(2 ** 40), max: 2 ** 40 }), fc.maxSafeInteger(), fc.double()),
            type: fc.oneof(
              fc.string({ unit: "grapheme", maxLength: 40 }),
              fc.string({ unit: "binary", minLength: 200, maxLength: 70_000 }),
            ),
            data: wireValue,
          }),
          { maxLength: 30 },
        ),
        fc.integer({ min: 1, max: 20 }),
        (events, perArray) => {
          const rows: EncodedRow[] = events.map((e) => [
            e.seq,
            e.at,
            e.type,
            Buffer.from(encoder.encode(e.data)).toString("hex"),
          ]);
          const arrays = encodeEventArrays(rows, perArray);
          expect(arrays).toHaveLength(Math.ceil(events.length / perArray));
          // a plain copy, so binary decodes to Uint8Array as the generated data is, not to Buffer
          const decoded = arrays.flatMap((bytes) => decoder.decode(new Uint8Array(bytes)) as unknown[]);
          // the reference is the codec's own round trip (it too writes -0 as the integer 0)
          const reference = events.map(({ seq, at, type, data }) =>
            decoder.decode(encoder.encode({ seq, at, type, data })),
          );
          expect(decoded).toEqual(reference);
          // and byte for byte what the codec writes for the same events: each number in its
          // shortest form, each string and array header in its smallest width
          arrays.forEach((bytes, i) => {
            const chunk = events.slice(i * perArray, (i + 1) * perArray);
            expect(Buffer.from(bytes).equals(encoder.encode(chunk))).toBe(true);
          });
        },
      ),
      { numRuns: 200 },
    );
  });

  it("writes every integer width and its edges as the codec does", () => {
    const edges = [
      0,
      0x7f,
      0x80,
      0xff,
      0x100,
      0xffff,
      0x1_0000,
      0xffff_ffff,
      0x1_0000_0000,
      2 ** 53 - 1,
      2 ** 53,
    ];
    const values = [
      ...edges,
      ...edges.map((n) => -n),
      -32,
      -33,
      -0x80,
      -0x81,
      -0x8000,
      -0x8001,
      -(2 ** 31),
      -(2 ** 31) - 1,
      1.5,
    ];
    const events = values.map((n, i) => ({ seq: n, at: -n, type: "t", data: i }));
    const rows: EncodedRow[] = events.map((e) => [e.seq, e.at, e.type, encoder.encode(e.data)]);
    const [bytes, ...rest] = encodeEventArrays(rows, values.length);
    expect(rest).toEqual([]);
    expect(Buffer.from(bytes!).equals(encoder.encode(events))).toBe(true);
  });

  it("writes type strings and arrays at the edges of each header width as the codec does", () => {
    for (const length of [31, 32, 0xff, 0x100, 0xffff, 0x1_0000]) {
      const event = { seq: 1, at: 2, type: "x".repeat(length), data: null };
      const [bytes] = encodeEventArrays([[1, 2, event.type, encoder.encode(null)]], 1);
      expect(Buffer.from(bytes!).equals(encoder.encode([event]))).toBe(true);
    }
    for (const length of [15, 16, 0xffff, 0x1_0000]) {
      const events = Array.from({ length }, (_, i) => ({ seq: i + 1, at: 0, type: "t", data: 0 }));
      const rows: EncodedRow[] = events.map((e) => [e.seq, e.at, e.type, encoder.encode(0)]);
      const [bytes] = encodeEventArrays(rows, length, undefined, Number.MAX_SAFE_INTEGER);
      expect(Buffer.from(bytes!).equals(encoder.encode(events))).toBe(true);
      // the header alone, as a caller writing its own array's items after it uses it
      const header = arrayHeader(length);
      expect(header.equals(Buffer.from(bytes!).subarray(0, header.length))).toBe(true);
      expect(arrayHeaderSize(length)).toBe(header.length);
    }
  });

  it("closes an array once its rows' data reach the byte budget, and puts the envelope before each", () => {
    const rows: EncodedRow[] = Array.from({ length: 7 }, (_, i) => [
      i + 1,
      0,
      "t",
      encoder.encode(new Uint8Array(8)), // 10 bytes
    ]);
    const envelope = Uint8Array.of(0xee, 0xff);
    const arrays = encodeEventArrays(rows, 100, envelope, 30);
    expect(
      arrays.map((bytes) => decoder.decode(bytes.subarray(2)) as unknown[]).map((a) => a.length),
    ).toEqual([3, 3, 1]);
    for (const bytes of arrays) expect(Array.from(bytes.subarray(0, 2))).toEqual([0xee, 0xff]);
    expect(encodeEventArrays([], 10)).toEqual([]);
  });
});
