import { describe, expect, it, vi } from "vitest";
import { isSessionId } from "../../protocol/index.js";
import { newClientMessageId } from "../../src/client/index.js";

describe("newClientMessageId", () => {
  it("gives distinct ids in the §1 alphabet", () => {
    const ids = new Set(Array.from({ length: 1000 }, () => newClientMessageId()));
    expect(ids.size).toBe(1000);
    for (const id of ids) expect(isSessionId(id)).toBe(true);
  });

  it("is a random UUID where crypto.randomUUID exists", () => {
    const uuid = vi.spyOn(globalThis.crypto, "randomUUID");
    try {
      const id = newClientMessageId();
      expect(uuid).toHaveBeenCalledOnce();
      expect(id).toBe(uuid.mock.results[0]!.value);
      expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    } finally {
      uuid.mockRestore();
    }
  });

  it("works where randomUUID is missing (plain-http pages outside localhost)", () => {
    // Shadow the prototype's method on the instance, as a non-secure browser context lacks it.
    Object.defineProperty(globalThis.crypto, "randomUUID", { value: undefined, configurable: true });
    try {
      const a = newClientMessageId();
      const b = newClientMessageId();
      expect(a).toMatch(/^[0-9a-f]{32}$/);
      expect(a).not.toBe(b);
      // each byte is two hex digits, a small one too: sixteen bytes 0..15 read back in order
      const counting = vi.spyOn(globalThis.crypto, "getRandomValues").mockImplementation(<T>(array: T): T => {
        (array as unknown as Uint8Array).forEach((_, i, bytes) => {
          bytes[i] = i;
        });
        return array;
      });
      try {
        expect(newClientMessageId()).toBe("000102030405060708090a0b0c0d0e0f");
      } finally {
        counting.mockRestore();
      }
    } finally {
      Reflect.deleteProperty(globalThis.crypto, "randomUUID");
    }
    expect(typeof globalThis.crypto.randomUUID).toBe("function");
  });
});
