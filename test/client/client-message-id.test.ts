import { describe, expect, it } from "vitest";
import { isSessionId } from "../../protocol/index.js";
import { newClientMessageId } from "../../src/client/index.js";

describe("newClientMessageId", () => {
  it("gives distinct ids in the §1 alphabet", () => {
    const ids = new Set(Array.from({ length: 1000 }, () => newClientMessageId()));
    expect(ids.size).toBe(1000);
    for (const id of ids) expect(isSessionId(id)).toBe(true);
  });

  it("works where randomUUID is missing (plain-http pages outside localhost)", () => {
    // Shadow the prototype's method on the instance, as a non-secure browser context lacks it.
    Object.defineProperty(globalThis.crypto, "randomUUID", { value: undefined, configurable: true });
    try {
      const a = newClientMessageId();
      const b = newClientMessageId();
      expect(a).toMatch(/^[0-9a-f]{32}$/);
      expect(a).not.toBe(b);
    } finally {
      Reflect.deleteProperty(globalThis.crypto, "randomUUID");
    }
    expect(typeof globalThis.crypto.randomUUID).toBe("function");
  });
});
