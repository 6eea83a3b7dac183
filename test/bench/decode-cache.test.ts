import { encode } from "@msgpack/msgpack";
import { describe, expect, it } from "vitest";
import { DecodeCache } from "../../bench/harness/decode-cache.js";

const frame = (id: number, text: string) => Buffer.from(encode({ id, text }));

describe("follower fleet decode cache", () => {
  it("reuses the value of byte-identical frames", () => {
    const cache = new DecodeCache();
    const first = cache.decode(frame(1, "same"));
    expect(cache.decode(frame(1, "same"))).toBe(first);
    expect(first).toEqual({ id: 1, text: "same" });
  });

  it("decodes frames that only differ before their last bytes, where the fingerprint does not look", () => {
    const cache = new DecodeCache();
    const tail = "x".repeat(40);
    expect(cache.decode(frame(1, tail))).toEqual({ id: 1, text: tail });
    expect(cache.decode(frame(2, tail))).toEqual({ id: 2, text: tail });
    expect(cache.decode(frame(1, tail))).toEqual({ id: 1, text: tail });
  });

  it("keeps at most its capacity, evicting the oldest", () => {
    const cache = new DecodeCache(2);
    const a = cache.decode(frame(1, "a"));
    cache.decode(frame(2, "b"));
    cache.decode(frame(3, "c"));
    const again = cache.decode(frame(1, "a"));
    expect(again).toEqual(a);
    expect(again).not.toBe(a);
  });
});
