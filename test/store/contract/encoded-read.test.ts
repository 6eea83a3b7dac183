import { Decoder } from "@msgpack/msgpack";
import fc from "fast-check";
import { expect, it } from "vitest";
import type { NewEvent } from "../../../protocol/index.js";
import { Limits } from "../../../protocol/limits.js";
import { readBudget } from "../../../src/store/encoded-event-arrays.js";
import { encodeValue } from "../../../src/store/event-codec.js";
import type { SessionStore } from "../../../src/store/session-store.js";
import { readWholeLog } from "../../support/whole-log.js";
import { wireValue } from "../fixtures/wire-value.js";
import { delta, turnEnd, turnStart, userMessage } from "../open-store.js";
import { describeContract, storeFixture } from "./backends.js";

const decoder = new Decoder();
const ENVELOPE = Uint8Array.of(0x81, 0xa6, ...Buffer.from("events"));

/** Every array decoded (envelope stripped) and joined; fails if an array exceeds `perArray`. */
function decodeArrays(arrays: readonly Uint8Array[], perArray: number, envelope = ENVELOPE): unknown[] {
  const events: unknown[] = [];
  for (const bytes of arrays) {
    expect(Buffer.from(bytes.subarray(0, envelope.length)).equals(Buffer.from(envelope))).toBe(true);
    const value = decoder.decode(bytes) as { events: unknown[] };
    expect(value.events.length).toBeGreaterThan(0);
    expect(value.events.length).toBeLessThanOrEqual(perArray);
    events.push(...value.events);
  }
  return events;
}

const newEvent: fc.Arbitrary<NewEvent> = fc.oneof(
  fc.string({ unit: "grapheme", maxLength: 200 }).map((text) => delta("t1", text)),
  fc.string({ unit: "binary", maxLength: 200 }).map((text) => userMessage(text)),
  fc.record({ name: fc.string({ unit: "grapheme", maxLength: 40 }), args: wireValue }).map(
    ({ name, args }): NewEvent => ({
      type: "tool/call",
      data: { turnId: "t1", toolCallId: "c1", name, args },
    }),
  ),
);

async function readAllEncoded(store: SessionStore, sessionId: string, limit: number, perArray: number) {
  const events: unknown[] = [];
  let after = 0;
  for (;;) {
    const read = await store.readAfterEncoded(sessionId, after, limit, perArray, ENVELOPE);
    if (read.status !== "ok") throw new Error(read.status);
    expect(read.count).toBeLessThanOrEqual(limit);
    const page = decodeArrays(read.arrays, perArray);
    expect(page).toHaveLength(read.count);
    events.push(...page);
    if (read.count === 0) return { events, head: read.headSeq, lastSeq: read.lastSeq };
    after = read.lastSeq;
  }
}

describeContract("readAfterEncoded", (backend) => {
  const open = storeFixture(backend);
  it("decodes to exactly what readAfter returns, for random histories of unicode, binary and nested data", async () => {
    const { store } = await open();
    let n = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.array(newEvent, { minLength: 1, maxLength: 20 }), { minLength: 1, maxLength: 6 }),
        fc.integer({ min: 0, max: 2 ** 53 - 1 }),
        fc.integer({ min: 1, max: 40 }),
        fc.integer({ min: 1, max: 9 }),
        async (batches, at, limit, perArray) => {
          const sessionId = `s${n++}`;
          await store.create({ sessionId, owner: "o", model: "m" });
          for (const batch of batches) {
            const outcome = await store.append(sessionId, batch, { at });
            expect(outcome.status).toBe("appended");
          }
          const decoded = await readWholeLog(store, sessionId);
          if (decoded.status !== "ok") throw new Error(decoded.status);
          const encoded = await readAllEncoded(store, sessionId, limit, perArray);
          expect(encoded.events).toEqual(decoded.events);
          expect(encoded.head).toBe(decoded.headSeq);
          expect(encoded.lastSeq).toBe(decoded.headSeq);
        },
      ),
      { numRuns: 60 },
    );
  });

  it("never serves a read from before a write: appends, a clear and a delete are seen at once", async () => {
    const { store } = await open();
    await store.create({ sessionId: "a", owner: "o", model: "m" });
    const first = await store.readAfterEncoded("a", 0, 100, 10, ENVELOPE);
    if (first.status !== "ok") throw new Error(first.status);
    const again = await store.readAfterEncoded("a", 0, 100, 10, ENVELOPE);
    expect(again).toEqual(first);

    await store.append("a", [turnStart("t1"), delta("t1", "héllo ✓"), turnEnd("t1")]);
    const appended = await store.readAfterEncoded("a", 0, 100, 10, ENVELOPE);
    if (appended.status !== "ok") throw new Error(appended.status);
    expect(appended.count).toBe(first.count + 3);
    expect(appended.headSeq).toBe(first.headSeq + 3);
    const header = await store.header("a");
    expect(header.status === "ok" && header.headSeq).toBe(appended.headSeq);

    const cleared = await store.clear("a");
    if (cleared.status !== "cleared") throw new Error(cleared.status);
    const afterClear = await store.readAfterEncoded("a", 0, 100, 10, ENVELOPE);
    expect(afterClear).toMatchObject({
      status: "ok",
      epoch: cleared.epoch,
      headSeq: 0,
      count: 0,
      arrays: [],
    });

    await store.delete("a");
    expect(await store.readAfterEncoded("a", 0, 100, 10, ENVELOPE)).toEqual({ status: "retired" });
    expect(await store.header("a")).toEqual({ status: "retired" });
    expect(await store.readAfterEncoded("nobody", 0, 100, 10)).toEqual({ status: "not_found" });
  });

  it("closes arrays and reads of large events at their byte budgets, and says where the log goes on", async () => {
    const { store } = await open();
    await store.create({ sessionId: "big", owner: "o", model: "m" });
    // sizes around the budgets: small ones, 2 KiB (not large), 2 KiB + 1, up to near the limit
    const kib = [0, 2, 300, 1, 700, 1000, 2, 5, 1023, 0, 400, 400, 400, 3, 0, 900, 64, 1];
    const text = (i: number) => `${i}:${"k".repeat(Math.max(0, kib[i % kib.length]! * 1024 - 80))}`;
    for (let n = 0; n < 4; n++) {
      const batch = kib.map((_, i) => delta("t", text(n * kib.length + i)));
      expect((await store.append("big", batch)).status).toBe("appended");
    }
    const all = await readWholeLog(store, "big");
    if (all.status !== "ok") throw new Error(all.status);
    // the largest encoded event, as an array carries it
    const eventBytes = (e: unknown) => Buffer.byteLength(JSON.stringify(e)) + 64;
    const largestEvent = Math.max(...all.events.map(eventBytes));
    for (const [limit, perArray] of [
      [500, 500],
      [4000, 500],
      [7, 3],
    ] as const) {
      const events: unknown[] = [];
      let after = 0;
      for (let reads = 0; reads < 1000; reads++) {
        const read = await store.readAfterEncoded("big", after, limit, perArray, ENVELOPE);
        if (read.status !== "ok") throw new Error(read.status);
        if (read.count === 0) break;
        const bytes = read.arrays.reduce((sum, a) => sum + a.length, 0);
        expect(bytes).toBeLessThan(readBudget(limit, perArray) + largestEvent);
        for (const array of read.arrays)
          expect(array.length).toBeLessThan(Limits.eventItemBytes + largestEvent);
        events.push(...decodeArrays(read.arrays, perArray));
        expect(read.count).toBeLessThanOrEqual(limit);
        // a read short of its limit either reached the head or stopped at its byte budget
        if (read.count < limit && read.lastSeq < read.headSeq)
          expect(bytes).toBeGreaterThan(readBudget(limit, perArray) / 2);
        after = read.lastSeq;
      }
      expect(events).toEqual(all.events);
    }
  });

  it("ends a page of large events at the item budget, from the cursor's side, and says there is more", async () => {
    const { store } = await open();
    await store.create({ sessionId: "pages", owner: "o", model: "m" });
    const kib = [1, 600, 300, 200, 1, 900, 900, 0, 0, 1000, 5, 300];
    const batch = kib.map((k, i) => delta("t", `${i}:${"q".repeat(k * 1024)}`));
    expect((await store.append("pages", batch)).status).toBe("appended");
    const all = await readWholeLog(store, "pages");
    if (all.status !== "ok") throw new Error(all.status);
    const size = (e: { data: unknown }) => Buffer.byteLength(JSON.stringify(e.data));
    const largest = Math.max(...all.events.map(size));
    const pageBytes = (events: { data: unknown }[]) => events.reduce((sum, e) => sum + size(e), 0);
    // forward from the start, by afterSeq
    const forward: number[] = [];
    let after = 0;
    let pages = 0;
    for (let n = 0; n < 100; n++) {
      pages++;
      const page = await store.page("pages", { afterSeq: after, limit: 1000 });
      if (page.status !== "ok") throw new Error(page.status);
      expect(page.events.length).toBeGreaterThan(0);
      expect(pageBytes(page.events)).toBeLessThan(Limits.eventItemBytes + largest);
      forward.push(...page.events.map((e) => e.seq));
      after = page.events.at(-1)!.seq;
      expect(page.hasMore).toBe(after < page.headSeq);
      if (!page.hasMore) break;
    }
    expect(forward).toEqual(all.events.map((e) => e.seq));
    expect(forward.length).toBeGreaterThan(0);
    // backward from the tail, by beforeSeq: the newest events first, each page ascending
    const backward: number[] = [];
    let before: number | undefined;
    for (let n = 0; n < 100; n++) {
      pages++;
      const page = await store.page(
        "pages",
        before === undefined ? { limit: 1000 } : { beforeSeq: before, limit: 1000 },
      );
      if (page.status !== "ok") throw new Error(page.status);
      expect(pageBytes(page.events)).toBeLessThan(Limits.eventItemBytes + largest);
      if (before === undefined) expect(page.events.at(-1)!.seq).toBe(page.headSeq);
      backward.unshift(...page.events.map((e) => e.seq));
      before = page.events[0]!.seq;
      expect(page.hasMore).toBe(before > 1);
      if (!page.hasMore) break;
    }
    expect(backward).toEqual(all.events.map((e) => e.seq));
    // 5 MiB read each way: the budget, not the count limit, ended all but the last pages
    expect(pages).toBeGreaterThanOrEqual(6);
  });

  it("a page after the head or before the first event is empty and says there is no more", async () => {
    const { store } = await open();
    await store.create({ sessionId: "edges", owner: "o", model: "m" });
    await store.append("edges", [turnStart("t1"), delta("t1", "a")]);
    for (const afterSeq of [3, 4, 100]) {
      expect(await store.page("edges", { afterSeq, limit: 10 })).toMatchObject({
        status: "ok",
        headSeq: 3,
        events: [],
        hasMore: false,
      });
    }
    expect(await store.page("edges", { beforeSeq: 1, limit: 10 })).toMatchObject({
      status: "ok",
      headSeq: 3,
      events: [],
      hasMore: false,
    });
    const last = await store.page("edges", { afterSeq: 2, limit: 10 });
    expect(last.status === "ok" && [last.events.map((e) => e.seq), last.hasMore]).toEqual([[3], false]);
    const first = await store.page("edges", { beforeSeq: 2, limit: 10 });
    expect(first.status === "ok" && [first.events.map((e) => e.seq), first.hasMore]).toEqual([[1], false]);
  });

  it("ends a log read of large events at the item budget, before the head it reports", async () => {
    const { store } = await open();
    await store.create({ sessionId: "reads", owner: "o", model: "m" });
    const kib = [1, 600, 300, 200, 1, 900, 900, 0, 0, 1000, 5, 300, 2, 2];
    const batch = kib.map((k, i) => delta("t", `${i}:${"r".repeat(k * 1024)}`));
    expect((await store.append("reads", batch)).status).toBe("appended");
    const size = (e: { data: unknown }) => Buffer.byteLength(JSON.stringify(e.data));
    // 1000 events are more than fit the budget unmeasured; 500 of small ones would, so a read of
    // 500 must find the large ones first
    for (const limit of [1000, 500]) {
      const seqs: number[] = [];
      let after = 0;
      let reads = 0;
      let largest = 0;
      for (let n = 0; n < 100; n++) {
        const read = await store.readAfter("reads", after, limit);
        if (read.status !== "ok") throw new Error(read.status);
        if (read.events.length === 0) break;
        reads++;
        largest = Math.max(largest, ...read.events.map(size));
        const bytes = read.events.reduce((sum, e) => sum + size(e), 0);
        expect(bytes).toBeLessThan(Limits.eventItemBytes + 1024 * 1024);
        // the data as stored: what the budget counted
        expect(read.dataBytes).toBe(read.events.reduce((sum, e) => sum + encodeValue(e.data).byteLength, 0));
        // a read that did not reach the head ended at its budget (1 MiB of data, within one event)
        if (read.events.at(-1)!.seq < read.headSeq)
          expect(bytes + 1024 * 1024).toBeGreaterThanOrEqual(Limits.eventItemBytes);
        seqs.push(...read.events.map((e) => e.seq));
        after = read.events.at(-1)!.seq;
      }
      // seq 1 is the create's
      expect(seqs).toEqual([1, ...kib.map((_, i) => i + 2)]);
      expect(largest).toBeGreaterThan(1000 * 1024);
      // ended by the budget after events 4 (1,101 KiB), 7 (1,801 KiB) and 12 (1,305 KiB); the
      // fourth read reaches the head
      expect(reads).toBe(4);
    }
  });
});
