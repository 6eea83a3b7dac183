import { Decoder } from "@msgpack/msgpack";
import Database from "better-sqlite3";
import { afterEach, describe, expect, it } from "vitest";
import type { NewEvent } from "../../protocol/index.js";
import { Limits } from "../../protocol/limits.js";
import { type EncodedRow, encodeEventArrays } from "../../src/store/encoded-event-arrays.js";
import { encodeValue } from "../../src/store/event-codec.js";
import type { SessionStore } from "../../src/store/session-store.js";
import { delta, openTempStore } from "./open-store.js";

const ENVELOPE = Uint8Array.of(0x81, 0xa6, ...Buffer.from("events"));
const decoder = new Decoder();
let opened: ReturnType<typeof openTempStore> | undefined;

afterEach(async () => {
  await opened?.dispose();
  opened = undefined;
});

/** What the JavaScript encoder writes for the same rows, read by a second connection to the file. */
function reference(
  path: string,
  sessionId: string,
  afterSeq: number,
  limit: number,
  perArray: number,
  envelope?: Uint8Array,
) {
  const db = new Database(path, { readonly: true });
  try {
    const rows = db
      .prepare(
        "SELECT seq, at, type, hex(data) FROM events WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?",
      )
      .raw()
      .all(sessionId, afterSeq, limit) as EncodedRow[];
    return encodeEventArrays(rows, perArray, envelope).map((bytes) => Buffer.from(bytes));
  } finally {
    db.close();
  }
}

/** Same arrays, same bytes (compared as buffers: a deep equality of 500 KiB is slow). */
function expectSameArrays(actual: readonly Uint8Array[], expected: readonly Buffer[]) {
  expect(actual.map((bytes) => bytes.length)).toEqual(expected.map((bytes) => bytes.length));
  actual.forEach((bytes, i) => {
    const at = Buffer.from(bytes).compare(expected[i]!);
    expect(at, `array ${i} differs`).toBe(0);
  });
}

/** Reads the whole session with `readAfterEncoded`, checking each read against `reference`. */
async function compareAll(
  store: SessionStore,
  path: string,
  sessionId: string,
  limit: number,
  perArray: number,
) {
  let after = 0;
  let pages = 0;
  for (;;) {
    const read = await store.readAfterEncoded(sessionId, after, limit, perArray, ENVELOPE);
    if (read.status !== "ok") throw new Error(read.status);
    expectSameArrays(read.arrays, reference(path, sessionId, after, limit, perArray, ENVELOPE));
    if (read.count === 0) return { pages, head: read.headSeq };
    pages++;
    after = read.lastSeq;
  }
}

const BOUNDARIES = [
  0,
  1,
  127,
  128,
  255,
  256,
  65_535,
  65_536,
  2 ** 32 - 1,
  2 ** 32,
  1_796_207_845_655,
  2 ** 53 - 1,
];

describe("a replay page encoded by SQLite", () => {
  it("is byte for byte what the JavaScript encoder writes, across every width of seq and at", async () => {
    opened = openTempStore();
    const { store, path } = opened;
    await store.create({ sessionId: "wide", owner: "o", model: "m" });
    // seqs cross 127, 255, 65,535 and 65,536; each batch of 3,999 takes the next `at` width
    const batch = Array.from({ length: 3_999 }, (_, i) => delta("t1", `d${i} ✓`));
    for (let n = 0; n < 17; n++) {
      const outcome = await store.append("wide", batch, { at: BOUNDARIES[n % BOUNDARIES.length]! });
      expect(outcome.status).toBe("appended");
    }
    const { pages, head } = await compareAll(store, path, "wide", 4000, 500);
    expect(head).toBe(1 + 17 * 3_999); // the creation's event, then the batches
    expect(pages).toBe(Math.ceil(head / 4000));
    // short pages, arrays at each header width (fixarray up to 15, then 16 bits), no envelope
    for (const [after, limit, perArray, envelope] of [
      [65_530, 13, 5, ENVELOPE],
      [100, 31, 15, ENVELOPE],
      [100, 32, 16, ENVELOPE],
      [100, 1_000, 500, undefined],
    ] as const) {
      const read = await store.readAfterEncoded("wide", after, limit, perArray, envelope);
      if (read.status !== "ok") throw new Error(read.status);
      expectSameArrays(read.arrays, reference(path, "wide", after, limit, perArray, envelope));
      expect(read).toMatchObject({ count: limit, lastSeq: after + limit });
    }
  });

  it("writes the array header of 16 bits up to 65,535 events and of 32 bits from 65,536", async () => {
    opened = openTempStore();
    const { store, path } = opened;
    await store.create({ sessionId: "many", owner: "o", model: "m" });
    // 16 bytes of data each: 65,536 of them are exactly the item budget
    const batch = Array.from({ length: 65_540 }, () => delta("t", ""));
    expect(encodeValue(batch[0]!.data).length).toBe(16);
    expect((await store.append("many", batch)).status).toBe("appended");
    for (const limit of [65_535, 65_536]) {
      const read = await store.readAfterEncoded("many", 1, limit, limit);
      if (read.status !== "ok") throw new Error(read.status);
      expect(read).toMatchObject({ count: limit, lastSeq: 1 + limit });
      expect(read.arrays).toHaveLength(1);
      expect(read.arrays[0]![0]).toBe(limit < 65_536 ? 0xdc : 0xdd);
      expectSameArrays(read.arrays, reference(path, "many", 1, limit, limit));
    }
  });

  it("falls back to the JavaScript encoder for a page holding what its SQL does not encode", async () => {
    opened = openTempStore();
    const { store, path } = opened;
    await store.create({ sessionId: "odd", owner: "o", model: "m" });
    const long = { type: "x".repeat(32), data: { turnId: "t1" } } as unknown as NewEvent;
    const unicode = { type: "ünïcödé/✓✓✓", data: { turnId: "t1" } } as unknown as NewEvent;
    const odd: [NewEvent[], number][] = [
      [[delta("t1", "a")], 1.5],
      [[delta("t1", "b")], -5],
      [[delta("t1", "b1")], -1],
      [[delta("t1", "c")], 2 ** 53],
      [[long, unicode], 7],
      [[delta("t1", "d"), delta("t1", "e")], 1_796_207_845_655],
    ];
    for (const [events, at] of odd)
      expect((await store.append("odd", events, { at })).status).toBe("appended");
    await compareAll(store, path, "odd", 2, 1);
    await compareAll(store, path, "odd", 10, 3);
    const read = await store.readAfterEncoded("odd", 0, 10, 10, ENVELOPE);
    expect(read).toMatchObject({ count: 9, lastSeq: 9 });
    if (read.status !== "ok") throw new Error(read.status);
    const events = (decoder.decode(read.arrays[0]!) as { events: { at: number; type: string }[] }).events;
    events.shift(); // the creation's event
    expect(events.map((e) => e.at)).toEqual([
      1.5,
      -5,
      -1,
      2 ** 53,
      7,
      7,
      1_796_207_845_655,
      1_796_207_845_655,
    ]);
    expect(events.map((e) => e.type).slice(4, 6)).toEqual(["x".repeat(32), "ünïcödé/✓✓✓"]);
  });

  it("cuts a page of large events where the JavaScript encoder closes its array, byte for byte", async () => {
    opened = openTempStore();
    const { store, path } = opened;
    await store.create({ sessionId: "large", owner: "o", model: "m" });
    // data of exactly 2,048 bytes stays out of the index of large events, 2,049 goes in
    const sized = (bytes: number, i: number) => {
      const event = delta("t1", "");
      const overhead = encodeValue(event.data).length;
      return delta("t1", `${i % 10}`.padEnd(bytes - overhead, "p"));
    };
    const sizes = [100, 2048, 2049, 2048, 300_000, 100, 700_000, 60_000, 2048, 1_048_000, 5, 2049];
    for (let n = 0; n < 6; n++) {
      const batch = sizes.map((bytes, i) => sized(bytes, n * sizes.length + i));
      expect((await store.append("large", batch)).status).toBe("appended");
    }
    // 500 events of exactly 2,048 bytes: under the budget without a cut
    expect(
      (
        await store.append(
          "large",
          Array.from({ length: 500 }, (_, i) => sized(2048, i)),
        )
      ).status,
    ).toBe("appended");
    const head = 1 + 6 * sizes.length + 500;
    for (let after = 0; after < head; after += 7) {
      const read = await store.readAfterEncoded("large", after, 500, 500, ENVELOPE);
      if (read.status !== "ok") throw new Error(read.status);
      expect(read.arrays).toHaveLength(1);
      const expected = reference(path, "large", after, 500, 500, ENVELOPE).slice(0, 1);
      expectSameArrays(read.arrays, expected);
    }
    const tail = await store.readAfterEncoded("large", head - 500, 500, 500, ENVELOPE);
    expect(tail).toMatchObject({ count: 500, lastSeq: head });
  });

  it("starts the next array at the event whose data before it is exactly the item budget", async () => {
    opened = openTempStore();
    const { store, path } = opened;
    await store.create({ sessionId: "exact", owner: "o", model: "m" });
    // a delta whose data is stored in exactly `bytes` bytes
    const exactly = (bytes: number) => {
      let length = bytes;
      for (let n = 0; n < 16 && encodeValue(delta("t1", "p".repeat(length)).data).length !== bytes; n++)
        length -= encodeValue(delta("t1", "p".repeat(length)).data).length - bytes;
      const event = delta("t1", "p".repeat(length));
      expect(encodeValue(event.data).length).toBe(bytes);
      return event;
    };
    const half = Limits.eventItemBytes / 2;
    // seqs 2, 3 reach the budget exactly, so 4 starts the next array; 4, 5 stay one byte under
    // it, so 6 joins them in an array read after 3
    const sizes = [half, half, half, half - 1, 100, 100];
    expect((await store.append("exact", sizes.map(exactly))).status).toBe("appended");
    // another session's log of the same seqs counts toward neither the cut nor the bytes
    await store.create({ sessionId: "neighbour", owner: "o", model: "m" });
    expect((await store.append("neighbour", sizes.map(exactly))).status).toBe("appended");
    const one = await store.readAfterEncoded("exact", 1, 500, 500, ENVELOPE);
    expect(one).toMatchObject({ count: 2, lastSeq: 3 });
    if (one.status !== "ok") throw new Error(one.status);
    expectSameArrays(one.arrays, reference(path, "exact", 1, 500, 500, ENVELOPE).slice(0, 1));
    const later = await store.readAfterEncoded("exact", 3, 500, 500, ENVELOPE);
    expect(later).toMatchObject({ count: 3, lastSeq: 6 });
    if (later.status !== "ok") throw new Error(later.status);
    expectSameArrays(later.arrays, reference(path, "exact", 3, 500, 500, ENVELOPE).slice(0, 1));
  });
});
