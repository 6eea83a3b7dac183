import { expect, it } from "vitest";
import { delta, turnEnd, turnStart, userMessage } from "../open-store.js";
import { describeContract, storeFixture } from "./backends.js";

describeContract("clear", (backend) => {
  const open = storeFixture(backend);
  it("is refused busy while a turn is open, and starts a new epoch from seq 1 after it ends", async () => {
    const { store } = await open();
    const created = await store.create({ sessionId: "a", owner: "o", model: "m", title: "Kept" });
    if (created.status !== "created") throw new Error(created.status);
    await store.append("a", [turnStart("t1"), userMessage("hello"), delta("t1", "hi")]);
    expect(await store.clear("a")).toEqual({ status: "busy" });
    const stillThere = await store.readAfter("a", 0, 100);
    expect(stillThere.status === "ok" && stillThere.headSeq).toBe(4);

    await store.append("a", [turnEnd("t1")]);
    const cleared = await store.clear("a");
    if (cleared.status !== "cleared") throw new Error(cleared.status);
    expect(cleared.epoch).not.toBe(created.header.epoch);

    const header = await store.header("a");
    expect(header.status === "ok" && header.headSeq).toBe(0);
    expect(header.status === "ok" && header.header.title).toBe("Kept");
    const appended = await store.append("a", [turnStart("t2")]);
    expect(appended.status === "appended" && appended.events[0]!.seq).toBe(1);
    expect(appended.status === "appended" && appended.epoch).toBe(cleared.epoch);
    expect(await store.search("hello", 10)).toEqual([]);
  });

  it("forgets the old epoch's ack: after a restart and a rebuild, a new completion is unseen", async () => {
    let clock = 3_000;
    const { store, openAnother } = await open({ now: () => clock });
    await store.create({ sessionId: "a", owner: "o", model: "m" });
    await store.append("a", [turnStart("t1"), turnEnd("t1")]);
    expect(await store.ack("a", 3_000)).toEqual({ status: "ok", hasUnseenCompletion: false });
    expect((await store.clear("a")).status).toBe("cleared");
    await store.close();
    const again = await openAnother({ now: () => clock });
    await again.rebuildProjections();
    // the clock stepped back: only an ack kept from before the clear could cover this completion
    clock = 2_000;
    await again.append("a", [turnStart("t2"), turnEnd("t2")]);
    expect((await again.projection("a"))?.hasUnseenCompletion).toBe(true);
  });

  it("checks busy inside the same transaction as a turn/start queued before it", async () => {
    const { store } = await open();
    await store.create({ sessionId: "a", owner: "o", model: "m" });
    const [started, cleared] = await Promise.all([store.append("a", [turnStart("t1")]), store.clear("a")]);
    expect(started.status).toBe("appended");
    expect(cleared).toEqual({ status: "busy" });
  });

  it("compare-and-clear: clears only when the expected epoch is current", async () => {
    const { store } = await open();
    const created = await store.create({ sessionId: "a", owner: "o", model: "m" });
    if (created.status !== "created") throw new Error(created.status);
    const first = await store.clear("a", { expectedEpoch: created.header.epoch });
    if (first.status !== "cleared") throw new Error(first.status);
    // a second client still holding the old epoch is told the current one and changes nothing
    await store.append("a", [userMessage("after")]);
    expect(await store.clear("a", { expectedEpoch: created.header.epoch })).toEqual({
      status: "epoch_mismatch",
      epoch: first.epoch,
    });
    const read = await store.readAfter("a", 0, 10);
    expect(read.status === "ok" && read.headSeq).toBe(1);
  });

  it("notifies subscribers of the new epoch", async () => {
    const { store } = await open();
    await store.create({ sessionId: "a", owner: "o", model: "m" });
    const kinds: string[] = [];
    store.subscribe("a", (notice) =>
      kinds.push(notice.kind === "clear" ? `clear:${notice.epoch}` : notice.kind),
    );
    const cleared = await store.clear("a");
    if (cleared.status !== "cleared") throw new Error(cleared.status);
    expect(kinds).toEqual([`clear:${cleared.epoch}`]);
  });

  it("answers not_found and retired as values", async () => {
    const { store } = await open();
    expect(await store.clear("nobody")).toEqual({ status: "not_found" });
    await store.create({ sessionId: "gone", owner: "o", model: "m" });
    await store.delete("gone");
    expect(await store.clear("gone")).toEqual({ status: "retired" });
  });
});
