import { expect, it } from "vitest";
import type { SessionEvent } from "../../../protocol/index.js";
import { HostMetrics } from "../../../src/transport/metrics.js";
import { readWholeLog } from "../../support/whole-log.js";
import { delta, turnStart } from "../open-store.js";
import { describeContract, storeFixture } from "./backends.js";

describeContract("group commit", (backend) => {
  const open = storeFixture(backend);
  it("keeps seq contiguous from 1 in every session under concurrent appends to 100 sessions", async () => {
    const { store } = await open();
    const ids = Array.from({ length: 100 }, (_, i) => `s${i}`);
    await Promise.all(ids.map((sessionId) => store.create({ sessionId, owner: "o", model: "m" })));
    const writers = ids.map(async (sessionId, w) => {
      for (let round = 0; round < 20; round++) {
        const count = 1 + ((round + w) % 3);
        const events = Array.from({ length: count }, (_, k) => delta("t", `w${w}r${round}k${k}`));
        const outcome = await store.append(sessionId, events);
        expect(outcome.status).toBe("appended");
      }
    });
    // a second wave of writers hitting the same sessions at the same time
    const rivals = ids.map(async (sessionId) => {
      for (let round = 0; round < 10; round++) await store.append(sessionId, [delta("t", `rival${round}`)]);
    });
    await Promise.all([...writers, ...rivals]);
    for (const [w, sessionId] of ids.entries()) {
      const read = await readWholeLog(store, sessionId);
      if (read.status !== "ok") throw new Error(read.status);
      const expected =
        1 + 10 + Array.from({ length: 20 }, (_, round) => 1 + ((round + w) % 3)).reduce((a, b) => a + b);
      expect(read.headSeq).toBe(expected);
      expect(read.events.map((event) => event.seq)).toEqual(
        Array.from({ length: expected }, (_, i) => i + 1),
      );
    }
  });

  it("resolves an append only after its commit is visible to another connection", async () => {
    const { store, openReader } = await open();
    await store.create({ sessionId: "a", owner: "o", model: "m" });
    const reader = await openReader();
    const pending = Array.from({ length: 50 }, (_, i) => store.append("a", [delta("t", `x${i}`)]));
    for (const promise of pending) {
      const outcome = await promise;
      if (outcome.status !== "appended") throw new Error(outcome.status);
      const seq = outcome.events[0]!.seq;
      const read = await reader.readAfter("a", seq - 1, 1);
      expect(read.status === "ok" && read.events.map((event) => event.seq)).toEqual([seq]);
    }
    const all = await reader.readAfter("a", 0, 100);
    expect(all.status === "ok" && all.headSeq).toBe(51);
  });

  it("delivers commit notices synchronously after commit, in commit order, before promises resolve", async () => {
    const { store } = await open();
    await store.create({ sessionId: "a", owner: "o", model: "m" });
    const seen: number[] = [];
    const global: number[] = [];
    store.subscribe("a", (notice) => {
      if (notice.kind === "append") seen.push(...notice.events.map((event) => event.seq));
    });
    store.subscribeAll((sessionId, notice, projection) => {
      if (notice.kind === "append") {
        global.push(...notice.events.map((event) => event.seq));
        expect(projection?.seq).toBe(notice.events[notice.events.length - 1]!.seq);
        expect(sessionId).toBe("a");
      }
    });
    const resolvedWith: number[][] = [];
    const pending = Array.from({ length: 30 }, (_, i) =>
      store.append("a", [delta("t", `x${i}`)]).then((outcome) => {
        if (outcome.status !== "appended") throw new Error(outcome.status);
        const seq = outcome.events[0]!.seq;
        // the notice for this seq was already delivered when the caller learns of the commit
        resolvedWith.push([seq, seen.includes(seq) ? 1 : 0]);
      }),
    );
    await Promise.all(pending);
    expect(resolvedWith.every(([, noticed]) => noticed === 1)).toBe(true);
    expect(seen).toEqual(Array.from({ length: 30 }, (_, i) => i + 2));
    expect(global).toEqual(seen);
  });

  it("shares one transaction among the appends of one tick", async () => {
    const metrics = new HostMetrics();
    const { store } = await open({ metrics });
    await Promise.all(
      Array.from({ length: 10 }, (_, i) => store.create({ sessionId: `s${i}`, owner: "o", model: "m" })),
    );
    const before = store.stats().transactions;
    const outcomes = await Promise.all(
      Array.from({ length: 200 }, (_, i) => store.append(`s${i % 10}`, [delta("t", `x${i}`)])),
    );
    expect(outcomes.every((outcome) => outcome.status === "appended")).toBe(true);
    expect(store.stats().transactions - before).toBe(1);
    const appends = (await metrics.appends.get()).values[0]?.value;
    expect(appends).toBe(10 + 200);
    const commits = (await metrics.commitSeconds.get()).values.find((v) => v.metricName?.endsWith("_count"));
    expect(commits?.value).toBeGreaterThanOrEqual(2);
  });

  it("reports each commit's duration in seconds, within the time the caller waited, with its events", async () => {
    const commits: [seconds: number, events: number][] = [];
    const { store } = await open({
      metrics: { committed: (seconds, events) => commits.push([seconds, events]) },
    });
    await store.create({ sessionId: "s", owner: "o", model: "m" });
    commits.length = 0;
    const started = performance.now();
    await Promise.all([
      store.append("s", [delta("t", "a"), delta("t", "b")]),
      store.append("s", [delta("t", "c")]),
    ]);
    const waitedSeconds = (performance.now() - started) / 1000;
    expect(commits).toHaveLength(1);
    const [[seconds, events]] = commits as [[number, number]];
    expect(events).toBe(3);
    expect(seconds).toBeGreaterThan(0);
    expect(seconds).toBeLessThanOrEqual(waitedSeconds);
  });

  it("settles every write queued before close before close resolves, and refuses the writes after it", async () => {
    const s = await open();
    await s.store.create({ sessionId: "s", owner: "o", model: "m" });
    const queued = Array.from({ length: 20 }, (_, i) => s.store.append("s", [delta("t", `x${i}`)]));
    let settled = 0;
    for (const write of queued)
      write.then(
        () => settled++,
        () => settled++,
      );
    await s.store.close();
    expect(settled).toBe(20);
    expect((await Promise.all(queued)).map((outcome) => outcome.status)).toEqual(Array(20).fill("appended"));
    await expect(s.store.append("s", [delta("t", "late")])).rejects.toMatchObject({
      code: "host_shutting_down",
    });
    const read = await readWholeLog(await s.openAnother(), "s");
    expect(read.status === "ok" && read.events.map((event) => event.seq)).toEqual(
      Array.from({ length: 21 }, (_, i) => i + 1),
    );
  });

  it("refuses one append without failing the others in its batch", async () => {
    const { store } = await open();
    await store.create({ sessionId: "live", owner: "o", model: "m" });
    await store.create({ sessionId: "gone", owner: "o", model: "m" });
    await store.delete("gone");
    const before = store.stats().transactions;
    const [a, b, c, d] = await Promise.all([
      store.append("live", [turnStart("t1")]),
      store.append("gone", [turnStart("t1")]),
      store.append("nobody", [turnStart("t1")]),
      store.append("live", [delta("t1", "hi")], { expectedEpoch: "stale" }),
    ]);
    expect(store.stats().transactions - before).toBe(1);
    expect(a.status).toBe("appended");
    expect(b.status).toBe("retired");
    expect(c.status).toBe("not_found");
    expect(d.status).toBe("epoch_mismatch");
    const read = await store.readAfter("live", 0, 100);
    expect(read.status === "ok" && read.events.map((event: SessionEvent) => event.type)).toEqual([
      "session/created",
      "turn/start",
    ]);
  });

  it("isolates a faulty write: only it fails, the rest of its batch commits", async () => {
    const { store } = await open();
    await store.create({ sessionId: "a", owner: "o", model: "m" });
    const unencodable = {
      type: "tool/result",
      data: { turnId: "t", toolCallId: "c", ok: true, result: () => 1, durationMs: 1 },
    };
    const [ok1, bad, ok2] = await Promise.allSettled([
      store.append("a", [delta("t", "one")]),
      store.append("a", [unencodable as never]),
      store.append("a", [delta("t", "two")]),
    ]);
    expect(ok1.status === "fulfilled" && ok1.value.status).toBe("appended");
    expect(bad.status).toBe("rejected");
    expect(ok2.status === "fulfilled" && ok2.value.status).toBe("appended");
    expect(store.stats().rollbacks).toBeGreaterThanOrEqual(1);
    const read = await store.readAfter("a", 0, 10);
    expect(read.status === "ok" && read.events.map((event) => event.seq)).toEqual([1, 2, 3]);
  });

  it("keeps nothing of a batch's first run when a write fails after the others already wrote", async () => {
    const { store } = await open();
    await store.create({ sessionId: "a", owner: "o", model: "m" });
    const unencodable = {
      type: "tool/result",
      data: { turnId: "t", toolCallId: "c", ok: true, result: () => 1 },
    };
    // the bounded create reads the owner's sessions, so the append before it has written its row by then
    const [appended, created, bad] = await Promise.allSettled([
      store.append("a", [delta("t", "once")]),
      store.create({ sessionId: "b", owner: "o", model: "m", maxOwnerSessions: 10 }),
      store.append("a", [unencodable as never]),
    ]);
    expect(appended.status === "fulfilled" && appended.value.status).toBe("appended");
    expect(created.status === "fulfilled" && created.value.status).toBe("created");
    expect(bad.status).toBe("rejected");
    const read = await readWholeLog(store, "a");
    expect(read.status === "ok" && read.events.map((event) => [event.seq, event.type])).toEqual([
      [1, "session/created"],
      [2, "assistant/delta"],
    ]);
  });
});
