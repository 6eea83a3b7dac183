import { Decoder, Encoder } from "@msgpack/msgpack";
import fc from "fast-check";
import { afterEach, describe, expect, it } from "vitest";
import type { NewEvent } from "../../protocol/index.js";
import { type EncodedRow, encodeEventArrays } from "../../src/store/encoded-event-arrays.js";
import type { SqliteSessionStore } from "../../src/store/sqlite-store.js";
import { delta, type openTempStore, userMessage } from "./open-store.js";

const decoder = new Decoder();
const encoder = new Encoder({ ignoreUndefined: true });
const ENVELOPE = Uint8Array.of(0x81, 0xa6, ...Buffer.from("events"));

let current: ReturnType<typeof openTempStore> | undefined;
afterEach(async () => {
  await current?.dispose();
  current = undefined;
});

/** Every array decoded (envelope stripped) and joined; fails if an array exceeds `perArray`. */
function decodeArrays(arrays: readonly Uint8Array[], perArray: number, envelope = ENVELOPE): unknown[] {
  const events: unknown[] = [];
  for (const bytes of arrays) {
    expect(Buffer.from(bytes.subarray(0, envelope.length)).equals(Buffer.from(envelope))).toBe(true);
    const value = decoder.decode(bytes) as { events: unknown[] };
    expect(value.events.length).toBeGreaterThan(0);
    expect(value.events.length).toBeLessThanOrEqual(perArray);
    events.push(...value.events);
  }
  return events;
}

/** Any MessagePack-representable value without `undefined`: unicode strings, binary, big numbers. */
const wireValue = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: "small" },
    fc.string({ unit: "grapheme", maxLength: 40 }),
    fc.string({ unit: "binary", maxLength: 300 }),
    fc.uint8Array({ maxLength: 300 }),
    fc.integer({ min: -(2 ** 31), max: 2 ** 32 }),
    fc.maxSafeInteger(),
    fc.double({ noNaN: true }),
    fc.boolean(),
    fc.constant(null),
    fc.array(tie("value"), { maxLength: 5 }),
    fc.dictionary(fc.string({ unit: "grapheme", maxLength: 12 }), tie("value"), { maxKeys: 5 }),
  ),
})).value;

const _newEvent: fc.Arbitrary<NewEvent> = fc.oneof(
  fc.string({ unit: "grapheme", maxLength: 200 }).map((text) => delta("t1", text)),
  fc.string({ unit: "binary", maxLength: 200 }).map((text) => userMessage(text)),
  fc.record({ name: fc.string({ unit: "grapheme", maxLength: 40 }), args: wireValue }).map(
    ({ name, args }): NewEvent => ({
      type: "tool/call",
      data: { turnId: "t1", toolCallId: "c1", name, args },
    }),
  ),
);

async function _readAllEncoded(
  store: SqliteSessionStore,
  sessionId: string,
  limit: number,
  perArray: number,
) {
  const events: unknown[] = [];
  let after = 0;
  for (;;) {
    const read = await store.readAfterEncoded(sessionId, after, limit, perArray, ENVELOPE);
    if (read.status !== "ok") throw new Error(read.status);
    expect(read.count).toBeLessThanOrEqual(limit);
    const page = decodeArrays(read.arrays, perArray);
    expect(page).toHaveLength(read.count);
    events.push(...page);
    if (read.count === 0) return { events, head: read.headSeq, lastSeq: read.lastSeq };
    after = read.lastSeq;
  }
}

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
