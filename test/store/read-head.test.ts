import { afterEach, describe, expect, it } from "vitest";
import { readReachedHead } from "../../src/store/read-head.js";
import type { ReadOutcome } from "../../src/store/session-store.js";
import { delta, openTempStore, turnStart } from "./open-store.js";

let opened: ReturnType<typeof openTempStore> | undefined;
afterEach(async () => {
  await opened?.dispose();
  opened = undefined;
});

async function readOk(afterSeq: number, limit: number) {
  const read = await opened!.store.readAfter("s", afterSeq, limit);
  if (read.status !== "ok") throw new Error(read.status);
  return read;
}

describe("whether a read reached its head", () => {
  it("says so only for a read whose last event is the head, or that found nothing", async () => {
    opened = openTempStore();
    await opened.store.create({ sessionId: "s", owner: "o", model: "m" });
    await opened.store.append("s", [turnStart("t1"), delta("t1", "a"), delta("t1", "b"), delta("t1", "c")]);
    // the creation's event, then seqs 2 to 5
    expect((await readOk(0, 10)).headSeq).toBe(5);
    expect(readReachedHead(await readOk(0, 2))).toBe(false);
    expect(readReachedHead(await readOk(3, 1))).toBe(false);
    // the last event is the head, whether the read asked for more or for exactly that many
    expect(readReachedHead(await readOk(0, 10))).toBe(true);
    expect(readReachedHead(await readOk(3, 2))).toBe(true);
    expect(readReachedHead(await readOk(4, 1))).toBe(true);
    // nothing after the cursor
    const empty = await readOk(5, 10);
    expect(empty.events).toEqual([]);
    expect(readReachedHead(empty)).toBe(true);
  });

  it("judges by the read's last event, and a read past the head it was read with reached it", async () => {
    opened = openTempStore();
    await opened.store.create({ sessionId: "s", owner: "o", model: "m" });
    await opened.store.append("s", [turnStart("t1"), delta("t1", "a"), delta("t1", "b")]);
    const whole = await readOk(0, 10);
    const read = (headSeq: number): Extract<ReadOutcome, { status: "ok" }> => ({ ...whole, headSeq });
    expect(whole.events.map((event) => event.seq)).toEqual([1, 2, 3, 4]);
    // a head that moved on after the read
    expect(readReachedHead(read(5))).toBe(false);
    // the last event, not the first, is at the head
    expect(readReachedHead(read(4))).toBe(true);
    // events committed between reading the head and reading the log
    expect(readReachedHead(read(3))).toBe(true);
    expect(readReachedHead({ ...whole, events: whole.events.slice(0, 2), headSeq: 3 })).toBe(false);
  });
});
