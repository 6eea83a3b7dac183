import { describe, expect, it } from "vitest";
import { decodeFrame, encodeFrame } from "../../../protocol/codec.js";
import type { HostFrame } from "../../../protocol/index.js";
import { trailingBinaryHead } from "../../../src/transport/mux/trailing-binary.js";

const big = (n: number) => new Uint8Array(n).map((_, i) => i % 253);
const EMPTY = new Uint8Array(0);
const LIMITS = { maxBinBytes: 1 << 20 };

const attachmentResult = (size: number, bytes: Uint8Array) =>
  ({ type: "result", id: 7, value: { name: "a.bin", type: "x/y", size, bytes } }) as HostFrame;

type Decoded = { value: { bytes: Uint8Array | null } };
const withoutBytes = (frame: Decoded) => ({ ...frame, value: { ...frame.value, bytes: null } });

describe("a binary sent after its frame's head, as it is read (protocol-v1 §4 session.attachment)", () => {
  it.each([0, 1, 255, 256, 65_536, 300_000])(
    "%i bytes: head + body decode as encodeFrame of the whole frame",
    (n) => {
      const body = big(n);
      const joined = Buffer.concat([trailingBinaryHead(attachmentResult(n, EMPTY), n), body]);
      // the encoder picks the smallest binary header; the head always announces a bin32
      const got = decodeFrame(joined, LIMITS) as Decoded;
      const whole = decodeFrame(encodeFrame(attachmentResult(n, body)), LIMITS) as Decoded;
      expect(Buffer.from(got.value.bytes!).equals(body)).toBe(true);
      expect(withoutBytes(got)).toEqual(withoutBytes(whole));
    },
  );

  it("follows the last key through nested maps and skips a trailing undefined as the encoder does", () => {
    const frame = { type: "result", id: 1, value: { outer: { bytes: EMPTY }, note: undefined } };
    const joined = Buffer.concat([
      trailingBinaryHead(frame as unknown as HostFrame, 3),
      Uint8Array.of(1, 2, 3),
    ]);
    const decoded = decodeFrame(joined) as { value: { outer: { bytes: Uint8Array } } };
    expect(Object.keys(decoded.value)).toEqual(["outer"]);
    expect(Array.from(decoded.value.outer.bytes)).toEqual([1, 2, 3]);
  });

  it.each([
    ["a binary that is not empty", { bytes: Uint8Array.of(1) }],
    ["a binary that is not last", { bytes: EMPTY, name: "after" }],
    ["no binary", { name: "x" }],
    // the last two bytes half match an empty binary's c4 00
    ["a binary whose bytes end in c4 and one more", { bytes: Uint8Array.of(0xc4, 0x01) }],
    ["a zero after the empty binary", { bytes: EMPTY, n: 0 }],
  ])("%s is refused", (_title, value) => {
    const head = () => trailingBinaryHead({ type: "result", id: 1, value } as unknown as HostFrame, 1);
    expect(head).toThrow(TypeError);
    expect(head).toThrow("the frame's last value must be an empty binary");
  });
});
