import { describe, expect, it } from "vitest";
import { ClientFrame, validator } from "../../protocol/index.js";
import { isRefusal, parseClientFrame } from "../../src/transport/mux/client-frame.js";

/**
 * The published `ClientFrame` schema (protocol-v1 §3, client → host) against the host's own
 * parser: a frame the host takes is a `ClientFrame`, and a frame of the wrong shape is neither.
 */
const schema = validator(ClientFrame);
const nothingInFlight = () => false;
const hostTakes = (frame: unknown) => !isRefusal(parseClientFrame(frame, nothingInFlight));

describe("ClientFrame", () => {
  it("is every frame the host takes: a call, an open and a close", () => {
    const taken = [
      { type: "call", id: 1, method: "session.list", params: {} },
      { type: "call", id: Number.MAX_SAFE_INTEGER, method: "session.list", params: {} },
      { type: "open", id: 2, method: "session.control", params: {} },
      { type: "close", id: 3 },
    ];
    for (const frame of taken) {
      expect(hostTakes(frame)).toBe(true);
      expect(schema.check(frame)).toBe(true);
    }
  });

  it("is no frame of another type, or without a positive safe integer id", () => {
    const refused = [
      { type: "result", id: 1, method: "session.list", params: {} },
      { type: "item", id: 1 },
      { type: "hello", id: 1 },
      { id: 1 },
      { type: "call", method: "session.list", params: {} },
      { type: "call", id: 0, method: "session.list", params: {} },
      { type: "open", id: 1.5, method: "session.control", params: {} },
      { type: "close", id: -1 },
      { type: "close" },
    ];
    for (const frame of refused) {
      expect(hostTakes(frame)).toBe(false);
      expect(schema.check(frame)).toBe(false);
    }
  });

  it("names its method with a string of at most 128 characters, on a call and on an open", () => {
    for (const type of ["call", "open"]) {
      expect(schema.check({ type, id: 1, method: "m".repeat(128) })).toBe(true);
      expect(schema.check({ type, id: 1, method: "m".repeat(129) })).toBe(false);
      expect(schema.check({ type, id: 1, method: 7 })).toBe(false);
      expect(schema.check({ type, id: 1 })).toBe(false);
    }
  });
});
