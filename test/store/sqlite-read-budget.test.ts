import { afterEach, describe, expect, it } from "vitest";
import { Limits } from "../../protocol/limits.js";
import { encodeValue } from "../../src/store/event-codec.js";
import { LARGE_EVENT_BYTES } from "../../src/store/sqlite-event-encoding.js";
import { delta, openTempStore } from "./open-store.js";

/**
 * SQLite reads a log without measuring it when no event among those asked for is large: only
 * then do they fit the item budget. These reads of events just at the large size check that a
 * read too long to fit is still measured, and ends where the budget is reached.
 */
let opened: ReturnType<typeof openTempStore> | undefined;
afterEach(async () => {
  await opened?.dispose();
  opened = undefined;
});

/** A delta whose data is stored in exactly `bytes` bytes. */
function sized(bytes: number) {
  const text = (length: number) => "p".repeat(length);
  let length = bytes;
  // the string header grows with the text: shrink until the encoded data fits exactly
  for (let n = 0; n < 16 && encodeValue(delta("t1", text(length)).data).length > bytes; n++)
    length -= encodeValue(delta("t1", text(length)).data).length - bytes;
  const event = delta("t1", text(length));
  expect(encodeValue(event.data).length).toBe(bytes);
  return event;
}

describe("a log read of events at the large-event size", () => {
  it("ends at the event whose data reaches the item budget, however many more were asked for", async () => {
    opened = openTempStore();
    const { store } = opened;
    await store.create({ sessionId: "s", owner: "o", model: "m" });
    // the largest events kept out of the index of large ones, enough of them to pass the budget
    const fit = Limits.eventItemBytes / LARGE_EVENT_BYTES;
    const batch = Array.from({ length: fit + 88 }, () => sized(LARGE_EVENT_BYTES));
    expect((await store.append("s", batch)).status).toBe("appended");
    const head = 1 + batch.length;

    const read = await store.readAfter("s", 1, 1000);
    if (read.status !== "ok") throw new Error(read.status);
    expect(read.events.map((e) => e.seq)).toEqual(Array.from({ length: fit }, (_, i) => i + 2));
    expect(read.dataBytes).toBe(Limits.eventItemBytes);
    expect(read.headSeq).toBe(head);

    const page = await store.page("s", { afterSeq: 1, limit: 1000 });
    if (page.status !== "ok") throw new Error(page.status);
    expect([page.events.length, page.events.at(-1)?.seq, page.hasMore]).toEqual([fit, fit + 1, true]);

    // as many as fit are read whole, the rest after them
    const fitting = await store.readAfter("s", 1, fit);
    expect(fitting.status === "ok" && fitting.events.length).toBe(fit);
    const rest = await store.readAfter("s", 1 + fit, 1000);
    expect(rest.status === "ok" && rest.events.map((e) => e.seq)).toEqual(
      Array.from({ length: 88 }, (_, i) => fit + 2 + i),
    );
  });
});
