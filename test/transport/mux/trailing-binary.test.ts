import { describe, expect, it } from "vitest";
import { decodeFrame, encodeFrame } from "../../../protocol/codec.js";
import type { HostFrame } from "../../../protocol/index.js";
import { SPLIT_BINARY_BYTES, splitTrailingBinary } from "../../../src/transport/mux/trailing-binary.js";

const big = (n: number) => new Uint8Array(n).map((_, i) => i % 253);

function joined(frame: HostFrame): Buffer {
  const split = splitTrailingBinary(frame);
  expect(split).not.toBeNull();
  return Buffer.concat([split!.head, split!.body]);
}

describe("a large trailing binary is sent beside its frame's encoding (no copy into the encoder)", () => {
  it.each([
    ["an attachment result", { name: "a.bin", type: "x/y", size: 3, bytes: big(SPLIT_BINARY_BYTES) }],
    ["a trailing undefined key is skipped as the encoder skips it", { bytes: big(300_000), note: undefined }],
    ["nested maps", { outer: { inner: { bytes: big(SPLIT_BINARY_BYTES + 7) } } }],
  ])("%s: head + body are exactly encodeFrame(frame)", (_title, value) => {
    const frame = { type: "result", id: 7, value } as unknown as HostFrame;
    const expected = Buffer.from(encodeFrame(frame));
    expect(joined(frame).equals(expected)).toBe(true);
    expect(decodeFrame(joined(frame))).toEqual(decodeFrame(expected));
  });

  it("the body is the caller's bytes, not a copy", () => {
    const bytes = big(SPLIT_BINARY_BYTES);
    const split = splitTrailingBinary({ type: "result", id: 1, value: { bytes } } as unknown as HostFrame);
    expect(split?.body).toBe(bytes);
  });

  it.each([
    ["a small binary", { bytes: big(SPLIT_BINARY_BYTES - 1) }],
    ["a binary that is not last", { bytes: big(SPLIT_BINARY_BYTES), name: "after" }],
    ["an array", [big(SPLIT_BINARY_BYTES)]],
    ["an empty map", {}],
  ])("%s is encoded whole (null)", (_title, value) => {
    expect(splitTrailingBinary({ type: "result", id: 1, value } as unknown as HostFrame)).toBeNull();
  });
});
