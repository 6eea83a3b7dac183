import { describe, expect, it } from "vitest";
import { isMethodName, METHOD_NAMES, paramsValidator } from "../../protocol/index.js";

/** Looking a method up by the name a frame or an in-process caller gives. */
describe("the method table's names", () => {
  it("knows a method only by its own string name", () => {
    expect(isMethodName("session.list")).toBe(true);
    // a property key made from something else: `Object.hasOwn` would turn each into "session.list"
    expect(isMethodName(["session.list"])).toBe(false);
    expect(isMethodName({ toString: () => "session.list" })).toBe(false);
    expect(isMethodName("toString")).toBe(false);
    expect(isMethodName(undefined)).toBe(false);
  });

  it("builds each method's params validator once and shares it", () => {
    for (const method of METHOD_NAMES) expect(paramsValidator(method)).toBe(paramsValidator(method));
    expect(paramsValidator("session.list")).not.toBe(paramsValidator("session.page"));
  });
});
