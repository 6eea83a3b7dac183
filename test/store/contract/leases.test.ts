import { expect, it } from "vitest";
import type { LiveStateNotice } from "../../../src/store/live-state-store.js";
import { readWholeLog } from "../../support/whole-log.js";
import { delta, turnStart, userMessage } from "../open-store.js";
import { type ContractStore, describeContract } from "./backends.js";
import { leaseWriters } from "./lease-writers.js";

const S = "s";
const LONG = 60_000;
/** Short enough to expire within a test; the tests poll for expiry, never time it. */
const SHORT = 150;

async function heads(store: ContractStore, sessionId = S): Promise<number> {
  const read = await readWholeLog(store, sessionId);
  return read.status === "ok" ? read.headSeq : -1;
}

async function untilExpired(store: ContractStore, sessionId = S): Promise<void> {
  await expect.poll(() => store.leaseHolder(sessionId), { timeout: 20_000, interval: 50 }).toBeNull();
}

describeContract("leases with fencing", (backend) => {
  const twoHosts = leaseWriters(backend, S);

  it("two hosts racing for a free lease: exactly one wins, the other sees it held", async () => {
    const { a, b } = await twoHosts();
    const outcomes = await Promise.all([
      a.acquireLease(S, "host-a", LONG),
      b.acquireLease(S, "host-b", LONG),
      a.acquireLease(S, "host-a", LONG),
      b.acquireLease(S, "host-b", LONG),
    ]);
    const winners = new Set(
      outcomes.filter((o) => o.status === "acquired").map((o) => o.status === "acquired" && o.lease.hostId),
    );
    expect(winners.size).toBe(1);
    const winner = [...winners][0] as string;
    for (const outcome of outcomes) {
      if (outcome.status === "held") expect(outcome.holder.hostId).toBe(winner);
      // the winner's second take renews: same generation
      if (outcome.status === "acquired") expect(outcome.lease.generation).toBe(1);
    }
    expect(await a.leaseHolder(S)).toMatchObject({ sessionId: S, hostId: winner, generation: 1 });
    expect(await a.acquireLease("missing", "host-a", LONG)).toEqual({ status: "not_found" });
  });

  it("an expired lease is taken over: new generation, running turn and jobs interrupted, stale fence refused", async () => {
    const { a, b } = await twoHosts();
    const first = await a.acquireLease(S, "host-a", LONG);
    if (first.status !== "acquired") throw new Error(first.status);
    const fenceA = first.lease;
    const ok = await a.append(
      S,
      [
        turnStart("t1"),
        userMessage("go"),
        { type: "job/started", data: { jobId: "j1", turnId: "t1", label: "build" } },
      ],
      { fence: fenceA },
    );
    expect(ok.status).toBe("appended");
    await a.enqueuePrompt({ sessionId: S, itemId: "q1", queuedAt: 1, input: { text: "next" } });
    // a renewal sets the remaining time: one millisecond lets it expire now, whatever the load
    await a.renewLeases("host-a", [fenceA], 1);
    await untilExpired(b);
    // expired is lost: its owner can neither append nor renew, even before anyone takes it
    expect(await a.append(S, [delta("t1", "late")], { fence: fenceA })).toEqual({ status: "fenced" });
    expect(await a.renewLeases("host-a", [fenceA], LONG)).toEqual({ renewed: [], lost: [fenceA] });

    const taken = await b.acquireLease(S, "host-b", LONG);
    expect(taken).toMatchObject({
      status: "acquired",
      lease: { sessionId: S, hostId: "host-b", generation: 2 },
      takeover: { fromHost: "host-a", interruptedTurnId: "t1" },
    });
    const before = await heads(b);
    expect(await a.append(S, [delta("t1", "stale")], { fence: fenceA })).toEqual({ status: "fenced" });
    expect(await heads(b)).toBe(before);
    const log = await b.readAfter(S, 0, 100);
    const tail =
      log.status === "ok"
        ? log.events.slice(-2).map((e) => [e.type, (e.data as { state?: string }).state])
        : [];
    expect(tail).toEqual([
      ["job/ended", "interrupted"],
      ["turn/end", "interrupted"],
    ]);
    expect((await b.projection(S))?.openTurnId).toBeNull();
    // durable queue items carry on under the new owner
    expect((await b.queue(S)).map((i) => i.itemId)).toEqual(["q1"]);
    if (taken.status !== "acquired") throw new Error(taken.status);
    expect((await b.append(S, [turnStart("t2")], { fence: taken.lease })).status).toBe("appended");
  });

  it("renew keeps current leases and reports lost ones; release frees the lease at once", async () => {
    const { a, b } = await twoHosts();
    await a.create({ sessionId: "other", owner: "alice", model: "m" });
    const mine = await a.acquireLease(S, "host-a", LONG);
    const short = await a.acquireLease("other", "host-a", SHORT);
    if (mine.status !== "acquired" || short.status !== "acquired") throw new Error("not acquired");
    await untilExpired(a, "other");
    const stolen = await b.acquireLease("other", "host-b", LONG);
    expect(stolen).toMatchObject({
      status: "acquired",
      takeover: { fromHost: "host-a", interruptedTurnId: null },
    });
    expect(await a.renewLeases("host-a", [mine.lease, short.lease], LONG)).toEqual({
      renewed: [mine.lease],
      lost: [short.lease],
    });
    expect(await b.acquireLease(S, "host-b", LONG)).toMatchObject({
      status: "held",
      holder: { hostId: "host-a" },
    });
    await a.releaseLease(mine.lease);
    expect(await b.leaseHolder(S)).toBeNull();
    expect(await a.append(S, [turnStart("t")], { fence: mine.lease })).toEqual({ status: "fenced" });
    // a free (released) lease is taken without a takeover; the generation still grows
    expect(await b.acquireLease(S, "host-b", LONG)).toMatchObject({
      status: "acquired",
      lease: { generation: 2 },
      takeover: null,
    });
    const page = await a.leasePage(null, 10);
    expect(page.leases.map((l) => [l.sessionId, l.hostId, l.generation, l.owner])).toEqual([
      ["other", "host-b", 2, "alice"],
      [S, "host-b", 2, "alice"],
    ]);
  });

  it("an append fenced by a lease released just before it, in the same transaction, is refused", async () => {
    const { a } = await twoHosts();
    const mine = await a.acquireLease(S, "host-a", LONG);
    if (mine.status !== "acquired") throw new Error(mine.status);
    // submitted together: one transaction, whose lease row changed after its lock was granted
    const [, appended] = await Promise.all([
      a.releaseLease(mine.lease),
      a.append(S, [turnStart("t")], { fence: mine.lease }),
    ]);
    expect(appended).toEqual({ status: "fenced" });
    expect(await heads(a)).toBe(1);
  });

  it("interruptOpenTurns spares sessions leased by another host and parked turns", async () => {
    const { a, b } = await twoHosts();
    for (const id of ["leased", "mine", "free", "parked"])
      await a.create({ sessionId: id, owner: "o", model: "m" });
    for (const id of ["leased", "mine", "free", "parked"]) await a.append(id, [turnStart(`t-${id}`)]);
    await a.append("parked", [
      {
        type: "interaction/requested",
        data: { turnId: "t-parked", interactionId: "ask", kind: "approval", action: "x" },
      },
    ]);
    await b.acquireLease("leased", "host-b", LONG);
    await a.acquireLease("mine", "host-a", LONG);
    expect((await a.interruptOpenTurns(5, { hostId: "host-a" })).sort()).toEqual(["free", "mine"]);
    expect((await a.projection("leased"))?.openTurnId).toBe("t-leased");
    expect((await a.projection("parked"))?.openTurnId).toBe("t-parked");
    // without a host id, every unexpired lease is spared
    expect(await a.interruptOpenTurns(6)).toEqual([]);
  });

  it("interruptOpenTurns closes the turns of sessions whose lease another host released or let expire", async () => {
    const { a, b } = await twoHosts();
    for (const id of ["released", "expired"]) {
      await a.create({ sessionId: id, owner: "o", model: "m" });
      await a.append(id, [turnStart(`t-${id}`)]);
    }
    const released = await b.acquireLease("released", "host-b", LONG);
    if (released.status !== "acquired") throw new Error(released.status);
    await b.releaseLease(released.lease);
    await b.acquireLease("expired", "host-b", SHORT);
    await untilExpired(a, "expired");
    // a released row keeps its last expiry, still ahead: that it names no host is what frees it
    expect((await a.interruptOpenTurns(5, { hostId: "host-a" })).sort()).toEqual(["expired", "released"]);
    expect((await a.projection("released"))?.openTurnId).toBeNull();
    expect((await a.projection("expired"))?.openTurnId).toBeNull();
  });

  it("a lease of an older generation is stale for its own host too: refused as a fence, lost on renewal", async () => {
    const { a } = await twoHosts();
    const first = await a.acquireLease(S, "host-a", LONG);
    if (first.status !== "acquired") throw new Error(first.status);
    await a.releaseLease(first.lease);
    const again = await a.acquireLease(S, "host-a", LONG);
    expect(again).toMatchObject({ status: "acquired", lease: { hostId: "host-a", generation: 2 } });
    if (again.status !== "acquired") throw new Error(again.status);
    // what a turn still running under the first lease would write
    expect(await a.append(S, [turnStart("old")], { fence: first.lease })).toEqual({ status: "fenced" });
    expect(await a.renewLeases("host-a", [first.lease, again.lease], LONG)).toEqual({
      renewed: [again.lease],
      lost: [first.lease],
    });
    expect(await heads(a)).toBe(1);
    // releasing the first lease again frees nothing: the second one is still held
    await a.releaseLease(first.lease);
    expect(await a.leaseHolder(S)).toMatchObject({ hostId: "host-a", generation: 2 });
  });

  it("a lease of a session deleted meanwhile, or never leased, is lost on renewal and refused as a fence; the others renew", async () => {
    const { a } = await twoHosts();
    await a.create({ sessionId: "doomed", owner: "alice", model: "m" });
    await a.create({ sessionId: "never", owner: "alice", model: "m" });
    const mine = await a.acquireLease(S, "host-a", LONG);
    const doomed = await a.acquireLease("doomed", "host-a", LONG);
    if (mine.status !== "acquired" || doomed.status !== "acquired") throw new Error("not acquired");
    await a.delete("doomed");
    const never = { sessionId: "never", hostId: "host-a", generation: 1 };
    expect(await a.renewLeases("host-a", [doomed.lease, mine.lease, never], LONG)).toEqual({
      renewed: [mine.lease],
      lost: [doomed.lease, never],
    });
    expect(await a.append("never", [turnStart("t")], { fence: never })).toEqual({ status: "fenced" });
    expect(await heads(a, "never")).toBe(1);
  });

  it("unownedQueues lists queued sessions whose lease is free, released or expired, not held or parked ones", async () => {
    const { a, b } = await twoHosts();
    const ids = ["expired", "free", "held", "idle", "parked", "released"];
    for (const id of ids) await a.create({ sessionId: id, owner: "o", model: "m" });
    for (const id of ids.filter((id) => id !== "idle"))
      await a.enqueuePrompt({ sessionId: id, itemId: `q-${id}`, queuedAt: 1, input: { text: "next" } });
    await a.append("parked", [
      turnStart("t-parked"),
      {
        type: "interaction/requested",
        data: { turnId: "t-parked", interactionId: "ask-parked", kind: "approval", action: "x" },
      },
    ]);
    await b.acquireLease("held", "host-b", LONG);
    await b.acquireLease("expired", "host-b", SHORT);
    const released = await b.acquireLease("released", "host-b", LONG);
    if (released.status !== "acquired") throw new Error(released.status);
    await b.releaseLease(released.lease);
    await untilExpired(a, "expired");
    expect(await a.unownedQueues(100)).toEqual(["expired", "free", "released"]);
    expect(await b.unownedQueues(2)).toEqual(["expired", "free"]);
    await a.acquireLease("free", "host-a", LONG);
    expect(await a.unownedQueues(100)).toEqual(["expired", "released"]);
  });

  it("lease changes are announced to live listeners", async () => {
    const { a } = await twoHosts();
    const seen: LiveStateNotice[] = [];
    a.subscribeLive((notice) => seen.push(notice));
    const taken = await a.acquireLease(S, "host-a", LONG);
    if (taken.status !== "acquired") throw new Error(taken.status);
    await a.acquireLease(S, "host-a", LONG);
    await a.releaseLease(taken.lease);
    expect(seen).toEqual([
      { kind: "lease", owner: "alice", sessionId: S, hostId: "host-a", generation: 1 },
      { kind: "lease", owner: "alice", sessionId: S, hostId: null, generation: 1 },
    ]);
  });
});
