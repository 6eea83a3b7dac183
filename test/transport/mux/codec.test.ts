import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { decodeFrame, encodeFrame } from "../../../protocol/codec.js";
import { SessionmuxError } from "../../../protocol/index.js";
import { Limits } from "../../../protocol/limits.js";
import { encodedEventsItems } from "../../../src/transport/mux/encoded-events.js";
import { itemFramePrefix, spliceItemFrame } from "../../../src/transport/mux/item-frame.js";

const bytes = (...parts: (number | number[] | Uint8Array)[]) =>
  Uint8Array.from(parts.flatMap((p) => (typeof p === "number" ? [p] : Array.from(p))));

function refusal(input: Uint8Array, limits?: Parameters<typeof decodeFrame>[1]): SessionmuxError {
  try {
    decodeFrame(input, limits);
  } catch (err) {
    if (err instanceof SessionmuxError) return err;
    throw err;
  }
  throw new Error("decoded");
}

const str = (s: string) => {
  const b = new TextEncoder().encode(s);
  if (b.length > 31) throw new Error("fixstr only");
  return [0xa0 | b.length, ...b];
};

describe("decodeFrame: the decoder-attack corpus of reliability.md is refused with bad_frame", () => {
  const corpus: [string, Uint8Array][] = [
    ["empty frame", bytes()],
    ["truncated map", bytes(0x82, ...str("type"))],
    ["truncated str", bytes(0x81, ...str("a"), 0xa5, 0x61)],
    ["trailing bytes", bytes(0x80, 0x00)],
    ["10,000-deep nesting", bytes(...new Array(10_000).fill(0x91), 0xc0)],
    ["dd ff ff ff ff (array32 of 4G items)", bytes(0xdd, 0xff, 0xff, 0xff, 0xff)],
    ["24,000 chained dc ff ff", bytes(...new Array(24_000).fill([0xdc, 0xff, 0xff]).flat())],
    ["huge str32 prefix", bytes(0xdb, 0xff, 0xff, 0xff, 0xff, 0x61)],
    ["huge bin32 prefix", bytes(0xc6, 0xff, 0xff, 0xff, 0xff, 0x00)],
    ["huge map32 prefix", bytes(0xdf, 0xff, 0xff, 0xff, 0xff)],
    ["fixext 1", bytes(0x81, ...str("a"), 0xd4, 0x01, 0x00)],
    ["ext 8", bytes(0xc7, 0x01, 0x05, 0x00)],
    ["timestamp ext -1", bytes(0xd6, 0xff, 0, 0, 0, 0)],
    ["reserved 0xc1", bytes(0xc1)],
    ["__proto__ key", bytes(0x81, ...str("__proto__"), 0x80)],
    ["constructor key", bytes(0x81, ...str("constructor"), 0x80)],
    ["prototype key", bytes(0x81, ...str("prototype"), 0x80)],
    [
      "nested __proto__ key",
      bytes(0x81, ...str("params"), 0x81, ...str("__proto__"), 0x81, ...str("x"), 0x01),
    ],
    ["integer key", bytes(0x81, 0x01, 0x02)],
    ["nil key", bytes(0x81, 0xc0, 0x02)],
    ["array key", bytes(0x81, 0x90, 0x02)],
    ["invalid UTF-8 (lone continuation)", bytes(0xa1, 0x80)],
    ["invalid UTF-8 (truncated sequence)", bytes(0xa2, 0xc3, 0x28)],
    ["invalid UTF-8 (overlong NUL)", bytes(0xa2, 0xc0, 0x80)],
    ["invalid UTF-8 (surrogate)", bytes(0xa3, 0xed, 0xa0, 0x80)],
    ["invalid UTF-8 (above U+10FFFF)", bytes(0xa4, 0xf4, 0x90, 0x80, 0x80)],
    ["invalid UTF-8 in a key", bytes(0x81, 0xa1, 0xff, 0x01)],
  ];
  for (const [name, input] of corpus) {
    it(name, () => {
      expect(refusal(input).code).toBe("bad_frame");
    });
  }
});

describe("decodeFrame: limits", () => {
  const str16 = (n: number) => bytes(0xda, n >> 8, n & 0xff, ...new Array(n).fill(0x61));
  const str32 = (n: number) => bytes(0xdb, 0, n >> 16, (n >> 8) & 0xff, n & 0xff, ...new Array(n).fill(0x61));
  it("strings up to 64 KiB pass, one byte more is refused", () => {
    expect(decodeFrame(str32(64 * 1024))).toHaveLength(64 * 1024);
    expect(refusal(str32(64 * 1024 + 1)).code).toBe("bad_frame");
  });
  // each above the values a frame may hold by default: the value limit is lifted to reach them
  const manyValues = { maxValues: 100_000 };
  it("arrays up to 10,000 items pass, 10,001 is refused", () => {
    const array = (n: number) => bytes(0xdc, n >> 8, n & 0xff, ...new Array(n).fill(0x01));
    expect(decodeFrame(array(10_000), manyValues)).toHaveLength(10_000);
    expect(refusal(array(10_001), manyValues).code).toBe("bad_frame");
  });
  it("maps up to 1,000 entries pass, 1,001 is refused", () => {
    const map = (n: number) => {
      const parts: number[] = [0xde, n >> 8, n & 0xff];
      for (let i = 0; i < n; i++) parts.push(...str(`k${i}`), 0x01);
      return Uint8Array.from(parts);
    };
    expect(Object.keys(decodeFrame(map(1_000), manyValues) as object)).toHaveLength(1_000);
    expect(refusal(map(1_001), manyValues).code).toBe("bad_frame");
  });
  it("frames of up to 4,096 values in all pass, 4,097 are refused", () => {
    // two arrays of n fixints in one: 3 + 2n values
    const twoArrays = (n: number) =>
      bytes(0x92, ...[0, 1].flatMap(() => [0xdc, n >> 8, n & 0xff, ...new Array(n).fill(0x01)]));
    expect(decodeFrame(bytes(0xdc, 0x0f, 0xff, ...new Array(4_095).fill(0x01)))).toHaveLength(4_095);
    expect(refusal(bytes(0xdc, 0x10, 0x00, ...new Array(4_096).fill(0x01))).code).toBe("bad_frame");
    expect(refusal(twoArrays(2_047)).code).toBe("bad_frame");
    expect(decodeFrame(twoArrays(2_046))).toHaveLength(2);
  });
  it("binaries up to 1 MiB pass, one byte more is refused", () => {
    const bin = (n: number) => {
      const out = new Uint8Array(5 + n);
      out.set([0xc6, n >>> 24, (n >> 16) & 0xff, (n >> 8) & 0xff, n & 0xff]);
      return out;
    };
    expect(decodeFrame(bin(1024 * 1024))).toBeInstanceOf(Uint8Array);
    expect(refusal(bin(1024 * 1024 + 1)).code).toBe("bad_frame");
  });
  it("32 levels of nesting pass, 33 are refused", () => {
    expect(decodeFrame(bytes(...new Array(32).fill(0x91), 0xc0))).toBeDefined();
    expect(refusal(bytes(...new Array(33).fill(0x91), 0xc0)).code).toBe("bad_frame");
  });
  it("limits can be raised or lowered per call", () => {
    expect(refusal(str16(100), { maxStrBytes: 99 }).code).toBe("bad_frame");
    expect(decodeFrame(str32(70_000), { maxStrBytes: 80_000 })).toHaveLength(70_000);
  });
});

describe("decodeFrame on arbitrary input", () => {
  it("either decodes or throws bad_frame, never anything else", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), (input) => {
        try {
          decodeFrame(input);
        } catch (err) {
          return err instanceof SessionmuxError && err.code === "bad_frame";
        }
        return true;
      }),
      { numRuns: 20_000 },
    );
  });

  it("round-trips what encodeFrame produces", () => {
    const value = fc.letrec((tie) => ({
      node: fc.oneof(
        { depthSize: "small" },
        fc.string(),
        fc.integer(),
        fc.double({ noNaN: true, noDefaultInfinity: true }).filter((d) => !Object.is(d, -0)),
        fc.boolean(),
        fc.constant(null),
        fc.uint8Array({ maxLength: 16 }),
        fc.array(tie("node"), { maxLength: 5 }),
        fc.dictionary(
          fc.string().filter((k) => !["__proto__", "constructor", "prototype"].includes(k)),
          tie("node"),
          { maxKeys: 5 },
        ),
      ),
    })).node;
    fc.assert(
      fc.property(value, (v) => {
        expect(decodeFrame(encodeFrame(v), { maxDepth: 1000 })).toEqual(v);
      }),
      { numRuns: 2_000 },
    );
  });

  it("leaves absent optional fields absent (undefined is not encoded as nil)", () => {
    expect(decodeFrame(encodeFrame({ type: "error", id: undefined, error: { code: "x" } }))).toEqual({
      type: "error",
      error: { code: "x" },
    });
  });
});

describe("item frames spliced around a shared value", () => {
  const value = {
    kind: "events",
    events: [{ seq: 1, at: 5, type: "assistant/delta", data: { turnId: "t", text: "hé" } }],
  };
  for (const id of [1, 127, 128, 255, 256, 65_535, 65_536, 2 ** 32 - 1, 2 ** 32, Number.MAX_SAFE_INTEGER]) {
    it(`decodes as {type:"item", id:${id}, value}`, () => {
      const frame = spliceItemFrame(itemFramePrefix(id), encodeFrame(value));
      expect(decodeFrame(frame)).toEqual({ type: "item", id, value });
    });
  }

  it("encodes one committed batch once and shares the bytes", () => {
    const events = value.events as never[];
    expect(encodedEventsItems(events)).toBe(encodedEventsItems(events));
    expect(encodedEventsItems(events).map((item) => decodeFrame(item))).toEqual([value]);
    // the same bytes as encoding the item, without stored rows to splice
    expect(Buffer.from(encodedEventsItems(events)[0]!).equals(Buffer.from(encodeFrame(value)))).toBe(true);
  });

  it("splits a batch of large events into items that each stop growing at the item budget", () => {
    const big = (seq: number, kb: number) => ({
      seq,
      at: seq,
      type: "tool/result",
      data: { turnId: "t", text: "z".repeat(kb * 1024) },
    });
    // 400 + 400 + 400 KiB pass the budget at the third; 2 + 1,022 KiB (and the maps) reach it
    const events = [big(1, 400), big(2, 400), big(3, 400), big(4, 2), big(5, 1022), big(6, 3)];
    const items = encodedEventsItems(events as never[]);
    const seqs = items.map((item) =>
      (decodeFrame(item, { maxStrBytes: 2 ** 21 }) as { events: { seq: number }[] }).events.map((e) => e.seq),
    );
    expect(seqs).toEqual([[1, 2, 3], [4, 5], [6]]);
    for (const item of items) expect(item.length).toBeLessThan(Limits.eventItemBytes + 1024 * 1024);
  });

  it("writes a batch from the rows the log stored byte for byte as encoding its events would", () => {
    const events = [
      { seq: 1, at: 1_700_000_000_123, type: "assistant/delta", data: { turnId: "t", text: "hé" } },
      { seq: 300, at: 2, type: "turn/end", data: { turnId: "t", reason: "done", skipped: undefined } },
      { seq: 70_000, at: 3, type: "user/message", data: { text: "x".repeat(300), n: [1.5, -2] } },
    ];
    const stored = events.map(({ seq, at, type, data }) => [seq, at, type, encodeFrame(data)] as const);
    const [fromRows, more] = encodedEventsItems(events as never[], stored as never);
    expect(more).toBeUndefined();
    expect(Buffer.from(fromRows!).equals(Buffer.from(encodeFrame({ kind: "events", events })))).toBe(true);
  });

  it("splices the stored data in as the log holds it, not encoded again from the events", () => {
    const events = [
      { seq: 1, at: 1, type: "user/message", data: { n: 5 } },
      { seq: 2, at: 2, type: "user/message", data: { n: 6 } },
    ];
    // {n: 5} as the log might hold it: 5 as a uint16 (cd 00 05), where an encoder writes a fixint
    const wide = Uint8Array.from([0x81, 0xa1, 0x6e, 0xcd, 0x00, 0x05]);
    const stored = [
      [1, 1, "user/message", wide],
      [2, 2, "user/message", encodeFrame(events[1]!.data)],
    ];
    const [item] = encodedEventsItems(events as never[], stored as never);
    expect(decodeFrame(item!)).toEqual({ kind: "events", events });
    expect(Buffer.from(item!).includes(Buffer.from(wide))).toBe(true);
    // encoding the events writes other bytes, so the stored ones above came from the rows
    const [encoded] = encodedEventsItems([...events] as never[]);
    expect(decodeFrame(encoded!)).toEqual({ kind: "events", events });
    expect(Buffer.from(encoded!).includes(Buffer.from(wide))).toBe(false);
  });

  it("encodes the events themselves when the stored rows are not the batch's (another count)", () => {
    const events = [
      { seq: 7, at: 1, type: "user/message", data: { text: "a" } },
      { seq: 8, at: 2, type: "user/message", data: { text: "b" } },
    ];
    const stored = [[7, 1, "user/message", encodeFrame(events[0]!.data)]];
    const [item, more] = encodedEventsItems(events as never[], stored as never);
    expect(more).toBeUndefined();
    expect(decodeFrame(item!)).toEqual({ kind: "events", events });
  });
});
