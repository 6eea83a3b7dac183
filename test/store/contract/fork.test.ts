import { expect, it } from "vitest";
import type { SessionEvent } from "../../../protocol/index.js";
import { encodeValue } from "../../../src/store/event-codec.js";
import { delta, turnEnd, turnStart, userMessage } from "../open-store.js";
import { describeContract, type Opener, storeFixture } from "./backends.js";

async function seeded(open: Opener) {
  return (await seededStore(open)).store;
}

async function seededStore(open: Opener) {
  const opened = await open({ now: () => 1_000 });
  const { store } = opened;
  await store.create({ sessionId: "src", owner: "o", model: "m1", title: "Source" });
  // seq 2..5: a finished turn; seq 6..8: a turn still open
  await store.append("src", [turnStart("t1"), userMessage("first"), delta("t1", "answer"), turnEnd("t1")], {
    at: 2_000,
  });
  await store.append("src", [turnStart("t2"), userMessage("second"), delta("t2", "part")], { at: 3_000 });
  return opened;
}

describeContract("fork", (backend) => {
  const open = storeFixture(backend);
  it("records lineage at seq 1 and copies the prefix re-sequenced, leaving the source untouched", async () => {
    const { store, openReader } = await seededStore(open);
    const before = await store.page("src", { limit: 100 });
    const forked = await store.fork({ sourceId: "src", targetId: "dst", owner: "p", atSeq: 5 });
    if (forked.status !== "created") throw new Error(forked.status);
    expect(forked.header.forkOf).toEqual({ sessionId: "src", seq: 5 });
    expect(forked.header.owner).toBe("p");
    // the lineage is stored, not only answered: a reader of its own finds it in the rows
    const reader = await openReader();
    for (const view of [store, reader]) {
      expect(await view.header("dst")).toMatchObject({ header: { forkOf: { sessionId: "src", seq: 5 } } });
      const source = await view.header("src");
      if (source.status !== "ok") throw new Error(source.status);
      expect(source.header).not.toHaveProperty("forkOf");
    }
    const read = await store.readAfter("dst", 0, 100);
    if (read.status !== "ok") throw new Error(read.status);
    expect(read.events[0]).toEqual({
      seq: 1,
      at: 1_000,
      type: "session/created",
      data: { forkOf: { sessionId: "src", seq: 5 }, title: "Source", model: "m1" },
    });
    expect(read.events.map((event) => [event.seq, event.type])).toEqual([
      [1, "session/created"],
      [2, "turn/start"],
      [3, "user/message"],
      [4, "assistant/delta"],
      [5, "turn/end"],
    ]);
    // copies keep their original time
    expect(read.events[2]!.at).toBe(2_000);
    expect(await store.page("src", { limit: 100 })).toEqual(before);
    const projection = await store.projection("dst");
    expect(projection).toMatchObject({
      title: "Source",
      turnCount: 1,
      lastState: "completed",
      openTurnId: null,
    });
  });

  it("closes a turn the copied prefix leaves open as interrupted", async () => {
    const store = await seeded(open);
    const forked = await store.fork({ sourceId: "src", targetId: "dst", owner: "o" });
    if (forked.status !== "created") throw new Error(forked.status);
    const last = forked.events[forked.events.length - 1]!;
    expect(last).toMatchObject({ seq: 9, type: "turn/end", data: { turnId: "t2", state: "interrupted" } });
    expect((await store.projection("dst"))?.lastState).toBe("interrupted");
    expect((await store.projection("src"))?.openTurnId).toBe("t2");
  });

  it("closes the jobs the copied prefix leaves running as interrupted, in the fork alone, before its open turn", async () => {
    const store = await seeded(open);
    const job = (jobId: string) => ({
      type: "job/started" as const,
      data: { jobId, turnId: "t2", label: jobId },
    });
    await store.append(
      "src",
      [job("j1"), job("j2"), { type: "job/ended", data: { jobId: "j2", state: "completed" } }],
      {
        at: 3_500,
      },
    );
    const forked = await store.fork({ sourceId: "src", targetId: "dst", owner: "o" });
    if (forked.status !== "created") throw new Error(forked.status);
    expect(forked.events.slice(-2)).toMatchObject([
      { seq: 12, at: 1_000, type: "job/ended", data: { jobId: "j1", state: "interrupted", byFork: true } },
      { seq: 13, at: 1_000, type: "turn/end", data: { turnId: "t2", state: "interrupted", byFork: true } },
    ]);
    // the job runs on in the source: its live row is not ended by the fork's log
    const page = await store.liveStatePage(null, 10);
    expect(page.sessions.map((live) => [live.sessionId, live.jobs.map((j) => j.jobId)])).toEqual([
      ["src", ["j1"]],
    ]);
  });

  it("marks only the ends a fork writes as the fork's: a fork of the fork copies them so, a host stop's stay unmarked", async () => {
    const store = await seeded(open);
    await store.append("src", [{ type: "job/started", data: { jobId: "j1", turnId: "t2", label: "j1" } }], {
      at: 3_500,
    });
    const first = await store.fork({ sourceId: "src", targetId: "dst", owner: "o", at: 4_000 });
    if (first.status !== "created") throw new Error(first.status);
    const second = await store.fork({ sourceId: "dst", targetId: "dst2", owner: "o", at: 5_000 });
    if (second.status !== "created") throw new Error(second.status);
    const ends = (events: readonly SessionEvent[]) =>
      events.flatMap((e) => (e.type === "job/ended" || e.type === "turn/end" ? [[e.seq, e.at, e.data]] : []));
    const cut = [
      [10, 4_000, { jobId: "j1", state: "interrupted", byFork: true }],
      [11, 4_000, { turnId: "t2", state: "interrupted", byFork: true }],
    ];
    expect(ends(first.events)).toEqual([[5, 2_000, { turnId: "t1", state: "completed" }], ...cut]);
    // nothing left running to end: the second fork's ends are the first's, marked as they were
    expect(ends(second.events)).toEqual(ends(first.events));
    // a host's stop ends the source's turn and job unmarked
    await store.interruptOpenTurns(6_000);
    const source = await store.page("src", { limit: 100 });
    if (source.status !== "ok") throw new Error(source.status);
    expect(ends(source.events as SessionEvent[]).slice(1)).toEqual([
      [10, 6_000, { jobId: "j1", state: "interrupted" }],
      [11, 6_000, { turnId: "t2", state: "interrupted" }],
    ]);
  });

  it("answers source_not_found, source_retired, exists and retired as values", async () => {
    const store = await seeded(open);
    expect(await store.fork({ sourceId: "nobody", targetId: "x", owner: "o" })).toEqual({
      status: "source_not_found",
    });
    expect(await store.fork({ sourceId: "src", targetId: "src", owner: "o" })).toEqual({ status: "exists" });
    await store.create({ sessionId: "gone", owner: "o", model: "m" });
    await store.delete("gone");
    expect(await store.fork({ sourceId: "gone", targetId: "x", owner: "o" })).toEqual({
      status: "source_retired",
    });
    expect(await store.fork({ sourceId: "src", targetId: "gone", owner: "o" })).toEqual({
      status: "retired",
    });
    expect(await store.isRetired("x")).toBe(false);
    expect(await store.header("x")).toEqual({ status: "not_found" });
  });

  it("a fork submitted with an append to its source copies what that append wrote", async () => {
    const store = await seeded(open);
    // one transaction: the fork's read of the source's events must see the append's rows
    const [appended, forked] = await Promise.all([
      store.append("src", [delta("t2", " more")], { at: 4_000 }),
      store.fork({ sourceId: "src", targetId: "dst", owner: "o" }),
    ]);
    expect(appended).toMatchObject({ status: "appended", events: [{ seq: 9 }] });
    if (forked.status !== "created") throw new Error(forked.status);
    expect(forked.header.forkOf).toEqual({ sessionId: "src", seq: 9 });
    const read = await store.readAfter("dst", 0, 100);
    if (read.status !== "ok") throw new Error(read.status);
    // lineage at 1, then source seqs 2..9 at 2..9 (and the open turn closed after them)
    expect(read.events.slice(1, 9).map((event) => event.type)).toEqual([
      "turn/start",
      "user/message",
      "assistant/delta",
      "turn/end",
      "turn/start",
      "user/message",
      "assistant/delta",
      "assistant/delta",
    ]);
    expect(read.events[8]?.data).toEqual({ turnId: "t2", text: " more" });
  });

  it("lists a fork by its own creation: updatedAt is max(createdAt, lastPromptAt) of the copied prompts", async () => {
    const store = await seeded(open);
    await store.create({ sessionId: "newer", owner: "o", model: "m", at: 5_000 });
    const forked = await store.fork({ sourceId: "src", targetId: "dst", owner: "o", at: 6_000 });
    if (forked.status !== "created") throw new Error(forked.status);
    expect(await store.projection("dst")).toMatchObject({
      createdAt: 6_000,
      lastPromptAt: 3_000,
      updatedAt: 6_000,
    });
    const { rows } = await store.list({ limit: 10 });
    expect(rows.map((row) => [row.sessionId, row.updatedAt])).toEqual([
      ["dst", 6_000],
      ["newer", 5_000],
      ["src", 3_000],
    ]);
  });

  it("refuses an atSeq past the head, naming the head, and creates nothing; at the head it forks", async () => {
    const store = await seeded(open);
    const usage = await store.ownerStoredBytes("o");
    for (const atSeq of [9, 999])
      expect(await store.fork({ sourceId: "src", targetId: "dst", owner: "o", atSeq })).toEqual({
        status: "seq_past_head",
        headSeq: 8,
      });
    expect(await store.header("dst")).toEqual({ status: "not_found" });
    expect((await store.list({ limit: 10 })).rows.map((row) => row.sessionId)).toEqual(["src"]);
    expect(await store.ownerStoredBytes("o")).toBe(usage);
    // the id was never taken: a fork at the head may still use it
    const forked = await store.fork({ sourceId: "src", targetId: "dst", owner: "o", atSeq: 8 });
    if (forked.status !== "created") throw new Error(forked.status);
    expect(forked.header.forkOf).toEqual({ sessionId: "src", seq: 8 });
  });
});

describeContract("fork: the copied prefix's bound", (backend) => {
  const open = storeFixture(backend);
  it("refuses a prefix holding more stored event data than maxDataBytes and creates nothing; one that fits forks", async () => {
    const store = await seeded(open);
    const read = await store.readAfter("src", 0, 100);
    if (read.status !== "ok") throw new Error(read.status);
    const bytesUpTo = (seq: number) =>
      read.events.filter((event) => event.seq <= seq).reduce((sum, e) => sum + encodeValue(e.data).length, 0);
    const usage = await store.ownerStoredBytes("o");
    // the whole log (8 events) is over the bound that fits its first 5 exactly
    const maxDataBytes = bytesUpTo(5);
    expect(bytesUpTo(8)).toBeGreaterThan(maxDataBytes);
    for (const atSeq of [undefined, 8, 6])
      expect(
        await store.fork({
          sourceId: "src",
          targetId: "dst",
          owner: "o",
          maxDataBytes,
          ...(atSeq === undefined ? {} : { atSeq }),
        }),
      ).toEqual({ status: "too_large", maxDataBytes });
    expect(
      await store.fork({
        sourceId: "src",
        targetId: "dst",
        owner: "o",
        atSeq: 5,
        maxDataBytes: maxDataBytes - 1,
      }),
    ).toEqual({
      status: "too_large",
      maxDataBytes: maxDataBytes - 1,
    });
    expect(await store.header("dst")).toEqual({ status: "not_found" });
    expect((await store.list({ limit: 10 })).rows.map((row) => row.sessionId)).toEqual(["src"]);
    expect(await store.ownerStoredBytes("o")).toBe(usage);
    // a prefix of exactly the bound is copied
    const forked = await store.fork({ sourceId: "src", targetId: "dst", owner: "o", atSeq: 5, maxDataBytes });
    if (forked.status !== "created") throw new Error(forked.status);
    expect(forked.header.forkOf).toEqual({ sessionId: "src", seq: 5 });
  });

  it("refuses a prefix of more events than maxEvents, whatever data they hold, and creates nothing; one of exactly that many forks", async () => {
    const store = await seeded(open);
    const usage = await store.ownerStoredBytes("o");
    for (const atSeq of [undefined, 8, 6])
      expect(
        await store.fork({
          sourceId: "src",
          targetId: "dst",
          owner: "o",
          maxDataBytes: 1 << 20,
          maxEvents: 5,
          ...(atSeq === undefined ? {} : { atSeq }),
        }),
      ).toEqual({ status: "too_large", maxDataBytes: 1 << 20 });
    expect(await store.header("dst")).toEqual({ status: "not_found" });
    expect(await store.ownerStoredBytes("o")).toBe(usage);
    const forked = await store.fork({ sourceId: "src", targetId: "dst", owner: "o", atSeq: 5, maxEvents: 5 });
    if (forked.status !== "created") throw new Error(forked.status);
    expect(forked.header.forkOf).toEqual({ sessionId: "src", seq: 5 });
  });
});
