import { describe, expect, it } from "vitest";
import { decodeFrame, encodeFrame } from "../../../protocol/codec.js";
import { Limits } from "../../../protocol/limits.js";
import { encodeEventArrays } from "../../../src/store/encoded-event-arrays.js";
import { EVENTS_VALUE_ENVELOPE } from "../../../src/transport/mux/encoded-events.js";
import { eventItemPieces } from "../../../src/transport/mux/event-item-pieces.js";
import { messagePackValueEnd } from "../../../src/transport/mux/messagepack-value-end.js";

const KIB = 1024;
const WIDE = { maxStrBytes: 2 ** 22, maxBinBytes: 2 ** 22, maxArrayLength: 100_000, maxValues: 2 ** 25 };

type Row = [number, number, string, Uint8Array];
const row = (seq: number, data: unknown, type = "assistant/delta"): Row => [
  seq,
  1_700_000_000_000 + seq,
  type,
  encodeFrame(data),
];
/** One `events` value holding every row, as a replay read of one array writes it. */
const eventsValue = (rows: Row[]) => encodeEventArrays(rows, rows.length, EVENTS_VALUE_ENVELOPE, 2 ** 40)[0]!;
const eventsOf = (value: Uint8Array) =>
  (decodeFrame(value, WIDE) as { kind: string; events: unknown[] }).events;
const seqsOf = (value: Uint8Array) => (eventsOf(value) as { seq: number }[]).map((e) => e.seq);

describe("eventItemPieces: an events item as items a client takes within its keepalive (protocol-v1 §5)", () => {
  it("splits 1 MiB of small events into about equal items under the bound, every event once and in order", () => {
    const rows = Array.from({ length: 500 }, (_, i) =>
      row(i + 1, { turnId: "t", text: `${i} ${"x".repeat(2040)}` }),
    );
    const value = eventsValue(rows);
    expect(value.length).toBeGreaterThan(KIB * KIB);
    const pieces = eventItemPieces(value);
    expect(pieces.length).toBe(Math.ceil(value.length / Limits.streamItemBytes));
    for (const piece of pieces) {
      expect(piece.length).toBeLessThanOrEqual(Limits.streamItemBytes);
      // about equal: none is a crumb left after full ones
      expect(piece.length).toBeGreaterThan(Limits.streamItemBytes / 2);
      expect((decodeFrame(piece, WIDE) as { kind: string }).kind).toBe("events");
    }
    expect(pieces.flatMap(eventsOf)).toEqual(eventsOf(value));
    // split once: a shared read gives every follower the same pieces
    expect(eventItemPieces(value)).toBe(pieces);
  });

  it("a value just past the bound makes two halves", () => {
    const rows = Array.from({ length: 70 }, (_, i) => row(i + 1, { text: "y".repeat(1000) }));
    const value = eventsValue(rows);
    expect(value.length).toBeGreaterThan(Limits.streamItemBytes);
    const pieces = eventItemPieces(value);
    expect(pieces.map(seqsOf)).toEqual([
      Array.from({ length: 35 }, (_, i) => i + 1),
      Array.from({ length: 35 }, (_, i) => i + 36),
    ]);
  });

  it("an event larger than the bound goes alone; those around it still fit the bound", () => {
    const rows = [
      row(1, { text: "a".repeat(40 * KIB) }),
      row(2, { text: "b".repeat(40 * KIB) }),
      row(3, { text: "c".repeat(300 * KIB) }, "tool/result"),
      row(4, { text: "d".repeat(10 * KIB) }),
      row(5, { text: "e".repeat(Limits.maxEventBytes - 64) }, "tool/result"),
      row(6, { bytes: new Uint8Array(20 * KIB), nested: [[{ n: -1.5 }], null, true, 2 ** 40] }),
    ];
    const value = eventsValue(rows);
    const pieces = eventItemPieces(value);
    expect(pieces.map(seqsOf)).toEqual([[1], [2], [3], [4], [5], [6]]);
    for (const piece of pieces)
      if (seqsOf(piece).length > 1) expect(piece.length).toBeLessThanOrEqual(Limits.streamItemBytes);
    expect(pieces.flatMap(eventsOf)).toEqual(eventsOf(value));
    // a bound of the caller's: 100 KiB puts 1 and 2 together
    expect(eventItemPieces(value, 100 * KIB).map(seqsOf)).toEqual([[1, 2], [3], [4], [5], [6]]);
  });

  it("one event larger than the bound is the value itself; two of them are two items", () => {
    const one = eventsValue([row(1, { text: "a".repeat(100 * KIB) })]);
    expect(eventItemPieces(one)).toEqual([one]);
    expect(eventItemPieces(one)[0]).toBe(one);
    const two = eventsValue([row(1, { text: "a".repeat(40 * KIB) }), row(2, { text: "b".repeat(40 * KIB) })]);
    expect(eventItemPieces(two).map(seqsOf)).toEqual([[1], [2]]);
  });

  it("a value of exactly the bound is sent as it is; one byte less and it is split", () => {
    const value = eventsValue(Array.from({ length: 20 }, (_, i) => row(i + 1, { text: "z".repeat(100) })));
    expect(eventItemPieces(value, value.length)[0]).toBe(value);
    const pieces = eventItemPieces(value, value.length - 1);
    expect(pieces.map(seqsOf)).toEqual([
      Array.from({ length: 10 }, (_, i) => i + 1),
      Array.from({ length: 10 }, (_, i) => i + 11),
    ]);
  });

  it("over many bounds and event sizes: every item within the bound or one event alone, every event once", () => {
    let seed = 7;
    const next = () => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    const rows = Array.from({ length: 120 }, (_, i) =>
      row(i + 1, { text: "r".repeat(Math.floor(next() * 600)) }),
    );
    const value = eventsValue(rows);
    const all = eventsOf(value);
    for (let maxBytes = 300; maxBytes < 4_000; maxBytes += 37) {
      const pieces = eventItemPieces(value, maxBytes);
      for (const piece of pieces) {
        expect(seqsOf(piece).length, `bound ${maxBytes}`).toBeGreaterThan(0);
        if (seqsOf(piece).length > 1) expect(piece.length, `bound ${maxBytes}`).toBeLessThanOrEqual(maxBytes);
      }
      expect(pieces.flatMap(eventsOf)).toEqual(all);
      // never more items than the bound needs once each is at least half of it
      expect(pieces.length).toBeLessThanOrEqual(2 * Math.ceil(value.length / maxBytes) + 1);
    }
  });

  it("an item of 15 events (the largest short array header) is split too", () => {
    const rows = Array.from({ length: 15 }, (_, i) => row(i + 1, { text: "f".repeat(5 * KIB) }));
    const pieces = eventItemPieces(eventsValue(rows), 40 * KIB);
    expect(pieces.length).toBeGreaterThan(1);
    for (const piece of pieces) expect(piece.length).toBeLessThanOrEqual(40 * KIB);
    expect(pieces.flatMap(seqsOf)).toEqual(rows.map(([seq]) => seq));
  });

  it("an item of more than 65,535 events (a 32-bit array header) is split too", () => {
    const rows = Array.from({ length: 70_000 }, (_, i) => row(i + 1, i % 2));
    const value = eventsValue(rows);
    const pieces = eventItemPieces(value);
    for (const piece of pieces) expect(piece.length).toBeLessThanOrEqual(Limits.streamItemBytes);
    expect(pieces.flatMap(seqsOf)).toEqual(rows.map(([seq]) => seq));
  });

  it("a value within the bound is sent as it is", () => {
    const value = eventsValue([row(1, { text: "short" }), row(2, { text: "also short" })]);
    expect(eventItemPieces(value)).toEqual([value]);
    expect(eventItemPieces(value)[0]).toBe(value);
  });

  it("refuses bytes that are not an events value", () => {
    expect(() => eventItemPieces(encodeFrame({ kind: "opened", pad: "z".repeat(70 * KIB) }))).toThrow(
      RangeError,
    );
    const events = eventsOf(
      eventsValue(Array.from({ length: 70 }, (_, i) => row(i + 1, { text: "y".repeat(1000) }))),
    );
    expect(() => eventItemPieces(encodeFrame({ kind: "events", events: {} }), 4)).toThrow(RangeError);
    // the same length of envelope, another kind
    expect(() => eventItemPieces(encodeFrame({ kind: "eventz", events }), 64 * KIB)).toThrow(RangeError);
    expect(() => eventItemPieces(encodeFrame({ kind: "events", events: "z".repeat(70 * KIB) }))).toThrow(
      RangeError,
    );
    const value = eventsValue(Array.from({ length: 70 }, (_, i) => row(i + 1, { text: "y".repeat(1000) })));
    expect(() => eventItemPieces(value.subarray(0, value.length - 1))).toThrow(RangeError);
    expect(() => eventItemPieces(Buffer.concat([value, Uint8Array.of(0xc0)]))).toThrow(RangeError);
  });
});

describe("messagePackValueEnd", () => {
  it("finds the end of every kind of value the encoder writes", () => {
    const values: unknown[] = [
      0,
      127,
      -1,
      -33,
      255,
      65_535,
      2 ** 32,
      -(2 ** 40),
      -32,
      -31,
      1.5,
      null,
      true,
      false,
      "",
      "s".repeat(31),
      "s".repeat(200),
      "s".repeat(70_000),
      new Uint8Array(3),
      new Uint8Array(300),
      new Uint8Array(70_000),
      [],
      Array.from({ length: 20 }, (_, i) => i),
      Array.from({ length: 15 }, (_, i) => [i]),
      Object.fromEntries(Array.from({ length: 15 }, (_, i) => [`k${i}`, { i }])),
      Array.from({ length: 70_000 }, () => 1),
      { a: 1 },
      Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`k${i}`, [i, { d: [i] }]])),
      Object.fromEntries(Array.from({ length: 70_000 }, (_, i) => [`k${i}`, i])),
      new Date(1_700_000_000_000),
    ];
    for (const value of values) {
      const bytes = encodeFrame(value);
      const padded = Buffer.concat([Uint8Array.of(0xc0, 0xc0), bytes, Uint8Array.of(0xc3)]);
      expect(messagePackValueEnd(padded, 2)).toBe(2 + bytes.length);
    }
  });

  it("extension types of every width, and refuses truncated bytes and 0xc1", () => {
    const ext = [
      [0xd4, 1, 0],
      [0xd5, 1, 0, 0],
      [0xd6, 1, 0, 0, 0, 0],
      [0xd7, 1, ...new Array(8).fill(0)],
      [0xd8, 1, ...new Array(16).fill(0)],
      [0xc7, 2, 1, 0, 0],
      [0xc8, 0, 2, 1, 0, 0],
      [0xc9, 0, 0, 0, 2, 1, 0, 0],
      [0xdf, 0, 0, 0, 1, 0xa1, 0x61, 0xc0],
      [0xdd, 0, 0, 0, 2, 0xc2, 0xc3],
      [0xc6, 0, 0, 0, 1, 9],
      [0xdb, 0, 0, 0, 1, 0x61],
    ];
    for (const bytes of ext)
      expect(messagePackValueEnd(Uint8Array.from([...bytes, 0xc0]), 0)).toBe(bytes.length);
    expect(() => messagePackValueEnd(Uint8Array.of(0xc1), 0)).toThrow(RangeError);
    // length fields that end the bytes exactly
    expect(messagePackValueEnd(Uint8Array.of(0xdc, 0, 0), 0)).toBe(3);
    expect(messagePackValueEnd(Uint8Array.of(0xc6, 0, 0, 0, 0), 0)).toBe(5);
    expect(messagePackValueEnd(Uint8Array.of(0xd9, 0), 0)).toBe(2);
    // a 32-bit count read whole: 16,777,216 items are not there
    expect(() => messagePackValueEnd(Uint8Array.of(0xdd, 1, 0, 0, 0, 0xc0), 0)).toThrow(RangeError);
    expect(() => messagePackValueEnd(Uint8Array.of(0xdc, 0), 0)).toThrow(RangeError);
    expect(() => messagePackValueEnd(Uint8Array.of(0x92, 0x01), 0)).toThrow(RangeError);
    expect(() => messagePackValueEnd(Uint8Array.of(0xa3, 0x61), 0)).toThrow(RangeError);
    expect(() => messagePackValueEnd(Uint8Array.of(0xcd, 0x01), 0)).toThrow(RangeError);
  });
});
