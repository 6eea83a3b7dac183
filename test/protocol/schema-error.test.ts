import { Type } from "@sinclair/typebox";
import { describe, expect, it } from "vitest";
import { Resolution } from "../../protocol/events.js";
import { QueueOp } from "../../protocol/methods.js";
import { validator } from "../../protocol/validate.js";

/** The refusal `parse` throws for `value`: its message and the field it names. */
function refusal(schema: Parameters<typeof validator>[0], value: unknown, what = "params") {
  try {
    validator(schema).parse(value, what);
  } catch (error) {
    const { code, message, data } = error as { code: string; message: string; data: unknown };
    return { code, message, data };
  }
  throw new Error("accepted");
}

describe("a refusal by a union schema names the field of the member the value came closest to", () => {
  it("an answer's bad outcome, wrong type, stray field, missing field and length", () => {
    expect(refusal(Resolution, { outcome: "maybe" }, "body")).toEqual({
      code: "bad_request",
      message: 'body/outcome: Expected one of "approve", "deny"',
      data: { field: "/outcome" },
    });
    expect(refusal(Resolution, { answer: 5 }, "body")).toEqual({
      code: "bad_request",
      message: "body/answer: Expected string",
      data: { field: "/answer" },
    });
    expect(refusal(Resolution, { answer: "a", note: "x" }, "body")).toEqual({
      code: "bad_request",
      message: "body/note: Unexpected property",
      data: { field: "/note" },
    });
    // as close to either: the first member is named
    expect(refusal(Resolution, {}, "body")).toEqual({
      code: "bad_request",
      message: "body/outcome: Expected required property",
      data: { field: "/outcome" },
    });
    expect(refusal(Resolution, { answer: "a".repeat(16_001) }, "body")).toEqual({
      code: "bad_request",
      message: "body/answer: Expected string length less or equal to 16000",
      data: { field: "/answer" },
    });
  });

  it("follows unions nested in a method's params to the field inside", () => {
    const params = Type.Object({ op: QueueOp });
    expect(refusal(params, { op: { remove: true, itemId: "a".repeat(129) } }).data).toEqual({
      field: "/op/itemId",
    });
    expect(refusal(params, { op: { clear: true, x: 1 } }).data).toEqual({ field: "/op/x" });
  });

  it("a value matching no member in any way is refused as a whole", () => {
    expect(refusal(Resolution, "approve", "body")).toEqual({
      code: "bad_request",
      message: "body: Expected object",
      data: { field: "/" },
    });
    // a union of unions: the inner one's own error is unfolded too
    const nested = Type.Union([Type.Union([Type.Object({ a: Type.String() }), Type.Number()]), Type.Null()]);
    expect(refusal(Type.Object({ v: nested }), { v: { a: 1 } }).data).toEqual({ field: "/v/a" });
  });

  it("a union of a literal and an object is followed into the object, not listed as values", () => {
    // one error against either member: the first, the object, is followed
    const choice = Type.Union([
      Type.Object({ model: Type.String() }, { additionalProperties: false }),
      Type.Literal("auto"),
    ]);
    expect(refusal(Type.Object({ pick: choice }), { pick: { model: 5 } })).toEqual({
      code: "bad_request",
      message: "params/pick/model: Expected string",
      data: { field: "/pick/model" },
    });
  });
});
