import { Decoder } from "@msgpack/msgpack";
import fc from "fast-check";
import { expect, it } from "vitest";
import type { NewEvent } from "../../../protocol/index.js";
import type { SessionStore } from "../../../src/store/session-store.js";
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
          const decoded = await store.readAfter(sessionId, 0, 10_000);
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
});
