import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { HostFrame, validator } from "../../protocol/index.js";
import { isHostFrame } from "../../src/client/host-frame-check.js";

const schema = validator(HostFrame);
const id = fc.oneof(
  fc.integer({ min: -2, max: 3 }),
  fc.constant(Number.MAX_SAFE_INTEGER),
  fc.double(),
  fc.string(),
);
const wireError = fc.record(
  {
    code: fc.oneof(fc.string(), fc.integer()),
    message: fc.oneof(fc.string(), fc.constant(null)),
    category: fc.constantFrom("protocol", "business", "internal", "other"),
    retryable: fc.oneof(fc.boolean(), fc.constant(0)),
    data: fc.anything(),
  },
  { requiredKeys: [] },
);
/** A `hello` limit: a count, or a number or value that is none. */
const limit = fc.oneof(fc.integer({ min: -1, max: 3 }), fc.double(), fc.string(), fc.constant(null));
/** Frames near the schema: every field present or missing, right or wrong. */
const nearFrame = fc.record(
  {
    type: fc.constantFrom("hello", "result", "item", "end", "error", "event", "call", 1),
    protocol: fc.constantFrom(1, 2, "1"),
    hostId: fc.oneof(fc.string(), fc.integer()),
    generation: fc.oneof(fc.string(), fc.constant(null)),
    serverTime: fc.oneof(fc.double(), fc.string()),
    maxPayloadBytes: limit,
    maxStrBytes: limit,
    id,
    value: fc.anything(),
    error: wireError,
    name: fc.oneof(fc.string(), fc.boolean()),
  },
  { requiredKeys: [] },
);

describe("the hand-written host frame check equals the HostFrame schema", () => {
  it("on frames near the schema", () => {
    fc.assert(
      fc.property(nearFrame, (frame) => {
        expect(isHostFrame(frame)).toBe(schema.check(frame));
      }),
      { numRuns: 5_000 },
    );
  });

  it("on arbitrary junk", () => {
    fc.assert(
      fc.property(fc.anything(), (junk) => {
        expect(isHostFrame(junk)).toBe(schema.check(junk));
      }),
      { numRuns: 2_000 },
    );
  });

  it("accepts every kind of valid frame", () => {
    const valid = [
      { type: "hello", protocol: 1, hostId: "h", generation: "g", serverTime: 1 },
      {
        type: "hello",
        protocol: 1,
        hostId: "h",
        generation: "g",
        serverTime: 1,
        maxPayloadBytes: 9,
        maxStrBytes: 1,
      },
      { type: "result", id: 1, value: null },
      { type: "item", id: 2, value: { kind: "x" } },
      { type: "end", id: 3 },
      { type: "error", error: { code: "bad_frame", message: "m", category: "protocol", retryable: false } },
      {
        type: "error",
        id: 4,
        error: { code: "x", message: "m", category: "internal", retryable: true, data: 1 },
      },
      { type: "event", name: "session.added", value: {} },
    ];
    for (const frame of valid) {
      expect(schema.check(frame)).toBe(true);
      expect(isHostFrame(frame)).toBe(true);
    }
  });
});
