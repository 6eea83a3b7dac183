import { describe, expect, it } from "vitest";
import { isRefusal, parseClientFrame } from "../../../src/transport/mux/client-frame.js";

/**
 * The checks of protocol-v1 §7 on a decoded frame, in their order (map → id → duplicate → type →
 * method → params), on the parser alone: which refusal comes first, what it says, and when it
 * carries the id (only when answering with it cannot end something in flight).
 */

const nothingInFlight = () => false;

function refusal(value: unknown, inFlight: (id: number) => boolean = nothingInFlight) {
  const parsed = parseClientFrame(value, inFlight);
  if (!isRefusal(parsed)) throw new Error(`accepted: ${JSON.stringify(parsed)}`);
  return {
    code: parsed.refused.code,
    message: parsed.refused.message,
    data: parsed.refused.data,
    id: parsed.id,
  };
}

describe("parseClientFrame", () => {
  it("refuses anything but a map, with no id to answer", () => {
    for (const value of [7, "call", null, undefined, true, [1, 2], new Uint8Array([0x80])]) {
      expect(refusal(value)).toEqual({
        code: "bad_frame",
        message: "a frame must be a MessagePack map",
        data: undefined,
        id: undefined,
      });
    }
  });

  it("refuses an id that is not a positive safe integer before anything else, with no id", () => {
    for (const id of [undefined, 0, -1, 1.5, 2 ** 53, "1", null]) {
      expect(refusal({ id, type: "nonsense" })).toEqual({
        code: "bad_frame",
        message: "`id` must be a positive safe integer",
        data: { field: "/id" },
        id: undefined,
      });
    }
    expect(isRefusal(parseClientFrame({ id: 2 ** 53 - 1, type: "close" }, nothingInFlight))).toBe(false);
  });

  it("takes a close for any id, in flight or not, whatever else the frame holds", () => {
    expect(parseClientFrame({ id: 3, type: "close" }, nothingInFlight)).toEqual({ type: "close", id: 3 });
    expect(parseClientFrame({ id: 3, type: "close", method: 5, params: "x" }, () => true)).toEqual({
      type: "close",
      id: 3,
    });
  });

  it("refuses an id in flight as a duplicate, without the id (answering it would end the running one)", () => {
    const inFlight = (id: number) => id === 9;
    expect(refusal({ id: 9, type: "call", method: "session.list" }, inFlight)).toEqual({
      code: "duplicate_id",
      message: "id 9 is already in flight; pick a new id",
      data: { id: 9 },
      id: undefined,
    });
    // checked before the type: a duplicate with a bad type is still a duplicate
    expect(refusal({ id: 9, type: "nonsense" }, inFlight).code).toBe("duplicate_id");
    expect(isRefusal(parseClientFrame({ id: 10, type: "call", method: "session.list" }, inFlight))).toBe(
      false,
    );
  });

  it("refuses a type other than call, open or close, with the id", () => {
    for (const type of [undefined, "CALL", "stream", 1]) {
      expect(refusal({ id: 4, type, method: "session.list" })).toEqual({
        code: "bad_frame",
        message: "`type` must be call, open or close",
        data: { field: "/type" },
        id: 4,
      });
    }
  });

  it("refuses a method that is not a string, with the id", () => {
    for (const method of [undefined, 5, ["session.list"]]) {
      expect(refusal({ id: 4, type: "call", method })).toEqual({
        code: "bad_frame",
        message: "`method` must be a string",
        data: { field: "/method" },
        id: 4,
      });
    }
  });

  it("refuses an unknown method, and a method of the other kind with a hint", () => {
    expect(refusal({ id: 5, type: "call", method: "session.nope" })).toEqual({
      code: "unknown_method",
      message: "no call method session.nope",
      data: { method: "session.nope" },
      id: 5,
    });
    expect(refusal({ id: 5, type: "open", method: "session.nope" }).message).toBe(
      "no stream method session.nope",
    );
    expect(refusal({ id: 5, type: "call", method: "session.follow" }).message).toBe(
      "no call method session.follow (it is a stream; use open)",
    );
    expect(refusal({ id: 5, type: "open", method: "session.list" }).message).toBe(
      "no stream method session.list (it is a call; use call)",
    );
    // a name inherited by every object is not a method
    expect(refusal({ id: 5, type: "call", method: "toString" }).code).toBe("unknown_method");
  });

  it("names a long unknown method by its first 128 characters only", () => {
    const long = "m".repeat(129);
    const refused = refusal({ id: 6, type: "call", method: long });
    expect(refused.message).toBe(`no call method ${"m".repeat(128)}…`);
    expect(refused.data).toEqual({ method: `${"m".repeat(128)}…` });
    expect(refusal({ id: 6, type: "call", method: "m".repeat(128) }).data).toEqual({
      method: "m".repeat(128),
    });
    // a character of two UTF-16 units across the cut is left out whole, never halved
    const split = refusal({ id: 6, type: "call", method: `${"m".repeat(127)}\u{1F600}x` });
    expect(split.data).toEqual({ method: `${"m".repeat(127)}…` });
  });

  it("checks params against the method's schema: absent params are an empty map, a bad one names its field", () => {
    expect(parseClientFrame({ id: 7, type: "call", method: "session.list" }, nothingInFlight)).toEqual({
      type: "call",
      id: 7,
      method: "session.list",
      params: {},
    });
    expect(
      parseClientFrame(
        { id: 7, type: "call", method: "session.list", params: { limit: 5 } },
        nothingInFlight,
      ),
    ).toEqual({ type: "call", id: 7, method: "session.list", params: { limit: 5 } });
    expect(parseClientFrame({ id: 8, type: "open", method: "session.control" }, nothingInFlight)).toEqual({
      type: "open",
      id: 8,
      method: "session.control",
      params: {},
    });
    const refused = refusal({ id: 7, type: "call", method: "session.list", params: { limit: "five" } });
    expect(refused).toEqual({
      code: "bad_request",
      message: "params/limit: Expected integer",
      data: { field: "/limit" },
      id: 7,
    });
    // params that are not a map at all: the whole of them is named
    expect(refusal({ id: 7, type: "call", method: "session.list", params: 5 })).toEqual({
      code: "bad_request",
      message: "params: Expected object",
      data: { field: "/" },
      id: 7,
    });
    expect(refusal({ id: 7, type: "call", method: "session.list", params: { extra: 1 } })).toMatchObject({
      code: "bad_request",
      id: 7,
    });
  });
});
