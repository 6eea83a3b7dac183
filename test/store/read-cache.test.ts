import { describe, expect, it } from "vitest";
import { ReadCache } from "../../src/store/read-cache.js";
import type { SessionStateRow } from "../../src/store/session-state.js";

/** A row with only the id filled in: the cache keeps rows whole and never looks inside them. */
const row = (sessionId: string) => ({ session_id: sessionId }) as SessionStateRow;

/** An encoded read outcome whose arrays hold `sizes` bytes. */
const read = (...sizes: number[]) => ({
  status: "ok" as const,
  epoch: "e",
  headSeq: 1,
  count: sizes.length,
  lastSeq: 1,
  arrays: sizes.map((size) => new Uint8Array(size)),
});

const KiB = 1024;

describe("ReadCache", () => {
  it("loads a session's state row once until cleared, and keeps no answer of not found", () => {
    const cache = new ReadCache();
    const loads: string[] = [];
    const load = (id: string) => () => {
      loads.push(id);
      return id === "gone" ? undefined : row(id);
    };
    const first = cache.state("a", load("a"));
    expect(first).toEqual(row("a"));
    expect(cache.state("a", load("a"))).toBe(first);
    expect(cache.state("gone", load("gone"))).toBeUndefined();
    expect(cache.state("gone", load("gone"))).toBeUndefined();
    expect(loads).toEqual(["a", "gone", "gone"]);
    cache.clear();
    expect(cache.state("a", load("a"))).not.toBe(first);
    expect(loads).toEqual(["a", "gone", "gone", "a"]);
  });

  it("keeps at most 4,096 state rows: the next one starts the kept rows afresh", () => {
    const cache = new ReadCache();
    let loads = 0;
    const load = (id: string) => () => {
      loads++;
      return row(id);
    };
    for (let i = 0; i < 4_095; i++) cache.state(`s${i}`, load(`s${i}`));
    // a session not found takes no room
    cache.state("gone", () => undefined);
    cache.state("s4095", load("s4095"));
    cache.state("s0", load("s0"));
    expect(loads).toBe(4_096);
    cache.state("one more", load("one more"));
    cache.state("one more", load("one more"));
    expect(loads).toBe(4_097);
    cache.state("s1", load("s1"));
    expect(loads).toBe(4_098);
  });

  it("tells reads apart by every part of the key, an envelope by its identity", () => {
    const cache = new ReadCache();
    const envelope = new Uint8Array([1, 2]);
    const same = new Uint8Array([1, 2]);
    const key = cache.encodedReadKey("s", 1, 2, 3, envelope);
    expect(cache.encodedReadKey("s", 1, 2, 3, envelope)).toBe(key);
    const others = [
      cache.encodedReadKey("s", 1, 2, 3, undefined),
      cache.encodedReadKey("s", 1, 2, 3, same),
      cache.encodedReadKey("t", 1, 2, 3, envelope),
      cache.encodedReadKey("s", 9, 2, 3, envelope),
      cache.encodedReadKey("s", 1, 9, 3, envelope),
      cache.encodedReadKey("s", 1, 2, 9, envelope),
      // the parts cannot run into each other
      cache.encodedReadKey("s1", 1, 2, 3, envelope),
    ];
    expect(new Set([key, ...others]).size).toBe(others.length + 1);
    expect(cache.encodedReadKey("s", 1, 2, 3, same)).toBe(others[1]);
    expect(cache.encodedReadKey("s", 1, 2, 3, undefined)).toBe(others[0]);
  });

  it("keeps a read up to 256 KiB until cleared, and none larger", () => {
    const cache = new ReadCache();
    const small = read(100 * KiB, 156 * KiB);
    cache.keepEncodedRead("small", small);
    cache.keepEncodedRead("large", read(200 * KiB, 56 * KiB + 1));
    expect(cache.encodedRead("small")).toBe(small);
    expect(cache.encodedRead("large")).toBeUndefined();
    cache.clear();
    expect(cache.encodedRead("small")).toBeUndefined();
  });

  it("keeps at most 64 reads, dropping the oldest first", () => {
    const cache = new ReadCache();
    for (let i = 0; i < 65; i++) cache.keepEncodedRead(`r${i}`, read(1));
    expect(cache.encodedRead("r0")).toBeUndefined();
    for (let i = 1; i < 65; i++) expect(cache.encodedRead(`r${i}`), `r${i}`).toBeDefined();
  });

  it("keeps at most 4 MiB of reads, dropping the oldest until there is room, and counts afresh after a clear", () => {
    const cache = new ReadCache();
    cache.keepEncodedRead("tiny0", read(1));
    cache.keepEncodedRead("tiny1", read(1));
    for (let i = 0; i < 15; i++) cache.keepEncodedRead(`r${i}`, read(256 * KiB));
    // 3.75 MiB and 2 bytes: all kept
    for (const key of ["tiny0", "tiny1", "r0", "r14"]) expect(cache.encodedRead(key), key).toBeDefined();
    // 256 KiB more fits only once both tiny reads are gone, and then exactly
    cache.keepEncodedRead("last", read(256 * KiB));
    expect(cache.encodedRead("tiny0")).toBeUndefined();
    expect(cache.encodedRead("tiny1")).toBeUndefined();
    for (let i = 0; i < 15; i++) expect(cache.encodedRead(`r${i}`), `r${i}`).toBeDefined();
    expect(cache.encodedRead("last")).toBeDefined();
    // one byte more drops the oldest 256 KiB, and only it
    cache.keepEncodedRead("byte", read(1));
    expect(cache.encodedRead("r0")).toBeUndefined();
    expect(cache.encodedRead("r1")).toBeDefined();
    // after a clear the bytes of the dropped reads count no more
    cache.clear();
    for (let i = 0; i < 16; i++) cache.keepEncodedRead(`n${i}`, read(256 * KiB));
    for (let i = 0; i < 16; i++) expect(cache.encodedRead(`n${i}`), `n${i}`).toBeDefined();
  });
});
