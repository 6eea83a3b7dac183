import { expect, it } from "vitest";
import { readWholeLog } from "../../support/whole-log.js";
import { delta, turnStart } from "../open-store.js";
import { type ContractStore, describeContract, storeFixture } from "./backends.js";
import { openStoppedClock } from "./stopped-clock.js";

const S = "s";

async function head(store: ContractStore): Promise<number> {
  const read = await readWholeLog(store, S);
  return read.status === "ok" ? read.headSeq : -1;
}

/**
 * A lease taken at 1,000 for 500 ms expires at 1,500 by the store's clock: held at 1,499 and lost
 * at 1,500 by every read and write that judges it, on every store.
 */
describeContract("a lease at the instant it expires", (backend) => {
  const open = storeFixture(backend);

  async function leasedAtThousand() {
    const clock = await openStoppedClock(backend, open, 1_000);
    await clock.store.create({ sessionId: S, owner: "alice", model: "m" });
    const taken = await clock.store.acquireLease(S, "host-a", 500);
    if (taken.status !== "acquired") throw new Error(taken.status);
    expect(taken.expiresAt).toBe(1_500);
    return { ...clock, taken };
  }

  it("is held one millisecond before and free at its expiry, by every lease read", async () => {
    const { store, other, set, taken } = await leasedAtThousand();
    await set(1_499);
    for (const reader of [store, other]) {
      expect(await reader.leaseHolder(S)).toEqual({ ...taken.lease, expiresAt: 1_500 });
      expect((await reader.leasePage(null, 10)).leases.map((l) => [l.sessionId, l.expiresAt])).toEqual([
        [S, 1_500],
      ]);
    }
    await set(1_500);
    for (const reader of [store, other]) {
      expect(await reader.leaseHolder(S)).toBeNull();
      expect(await reader.leasePage(null, 10)).toEqual({ leases: [], next: null });
    }
  });

  it("is held against another host one millisecond before, and taken over at its expiry", async () => {
    const { store, other, set, taken } = await leasedAtThousand();
    await store.append(S, [turnStart("t1")], { fence: taken.lease });
    await set(1_499);
    expect(await other.acquireLease(S, "host-b", 500)).toEqual({
      status: "held",
      holder: { ...taken.lease, expiresAt: 1_500 },
    });
    await set(1_500);
    expect(await other.acquireLease(S, "host-b", 500)).toEqual({
      status: "acquired",
      lease: { sessionId: S, hostId: "host-b", generation: 2 },
      expiresAt: 2_000,
      takeover: { fromHost: "host-a", interruptedTurnId: "t1" },
    });
    expect(await store.leaseHolder(S)).toEqual({
      sessionId: S,
      hostId: "host-b",
      generation: 2,
      expiresAt: 2_000,
    });
  });

  it("is renewed by its host one millisecond before its expiry, and lost at it", async () => {
    const { store, set, taken } = await leasedAtThousand();
    await set(1_499);
    expect(await store.renewLeases("host-a", [taken.lease], 500)).toEqual({
      renewed: [taken.lease],
      lost: [],
    });
    expect(await store.leaseHolder(S)).toMatchObject({ expiresAt: 1_999 });
    await set(1_998);
    expect(await store.renewLeases("host-a", [taken.lease], 500)).toEqual({
      renewed: [taken.lease],
      lost: [],
    });
    await set(2_498);
    expect(await store.leaseHolder(S)).toBeNull();
    expect(await store.renewLeases("host-a", [taken.lease], 500)).toEqual({
      renewed: [],
      lost: [taken.lease],
    });
    expect(await store.leaseHolder(S)).toBeNull();
    // its own host taking it again is a takeover too: a new generation
    expect(await store.acquireLease(S, "host-a", 500)).toMatchObject({
      status: "acquired",
      lease: { generation: 2 },
      takeover: { fromHost: "host-a" },
    });
  });

  it("fences its host's appends one millisecond before its expiry in, and at its expiry out", async () => {
    const { store, set, taken } = await leasedAtThousand();
    await set(1_499);
    // one after the other on one host: the second may run on the state the first committed
    expect(await store.append(S, [turnStart("t1")], { fence: taken.lease })).toMatchObject({
      status: "appended",
    });
    expect(await store.append(S, [delta("t1", "a")], { fence: taken.lease })).toMatchObject({
      status: "appended",
    });
    expect(await head(store)).toBe(3);
    await set(1_500);
    expect(await store.append(S, [delta("t1", "b")], { fence: taken.lease })).toEqual({ status: "fenced" });
    expect(await store.append(S, [delta("t1", "c")], { fence: taken.lease })).toEqual({ status: "fenced" });
    expect(await head(store)).toBe(3);
  });

  it("fences another instance's appends at its expiry too", async () => {
    const { other, set, taken } = await leasedAtThousand();
    await set(1_499);
    expect(await other.append(S, [turnStart("t1")], { fence: taken.lease })).toMatchObject({
      status: "appended",
    });
    await set(1_500);
    expect(await other.append(S, [delta("t1", "late")], { fence: taken.lease })).toEqual({
      status: "fenced",
    });
    expect(await head(other)).toBe(2);
  });

  it("keeps its queue owned one millisecond before its expiry, unowned at it", async () => {
    const { store, other, set } = await leasedAtThousand();
    await store.enqueuePrompt({ sessionId: S, itemId: "q1", queuedAt: 1_000, input: { text: "next" } });
    await set(1_499);
    expect(await other.unownedQueues(10)).toEqual([]);
    await set(1_500);
    expect(await other.unownedQueues(10)).toEqual([S]);
  });

  it("spares an open turn from interruptOpenTurns one millisecond before its expiry, not at it", async () => {
    const clock = await openStoppedClock(backend, open, 1_000);
    const { store, other, set } = clock;
    await store.create({ sessionId: S, owner: "alice", model: "m" });
    await store.append(S, [turnStart("t")]);
    expect(await store.acquireLease(S, "host-a", 500)).toMatchObject({ expiresAt: 1_500 });
    await set(1_499);
    expect(await other.interruptOpenTurns(1_499, { hostId: "host-b" })).toEqual([]);
    await set(1_500);
    expect(await other.interruptOpenTurns(1_500, { hostId: "host-b" })).toEqual([S]);
    expect((await store.projection(S))?.openTurnId).toBeNull();
  });
});
