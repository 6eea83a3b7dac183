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

  it("keeps frames that share their last bytes apart: each is decoded once, then reused", () => {
    const cache = new DecodeCache();
    const tail = "x".repeat(40);
    const one = cache.decode(frame(1, tail));
    const two = cache.decode(frame(2, tail));
    expect(one).toEqual({ id: 1, text: tail });
    expect(two).toEqual({ id: 2, text: tail });
    // Event frames all end with the same words: a tail fingerprint made them evict each other.
    expect(cache.decode(frame(1, tail))).toBe(one);
    expect(cache.decode(frame(2, tail))).toBe(two);
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
