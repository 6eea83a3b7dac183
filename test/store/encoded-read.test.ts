import { Decoder, Encoder } from "@msgpack/msgpack";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { type EncodedRow, encodeEventArrays } from "../../src/store/encoded-event-arrays.js";
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
        },
      ),
      { numRuns: 200 },
    );
  });
});
