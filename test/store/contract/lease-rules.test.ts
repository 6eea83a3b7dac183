import { expect, it } from "vitest";
import type { LiveStateNotice } from "../../../src/store/live-state-store.js";
import type { CommitNotice } from "../../../src/store/session-store.js";
import { readWholeLog } from "../../support/whole-log.js";
import { turnStart, userMessage } from "../open-store.js";
import { type ContractStore, describeContract } from "./backends.js";
import { leaseWriters } from "./lease-writers.js";

const S = "s";
const LONG = 60_000;

async function head(store: ContractStore, sessionId = S): Promise<number> {
  const read = await readWholeLog(store, sessionId);
  return read.status === "ok" ? read.headSeq : -1;
}

/** Lets the lease expire now (a renewal sets the remaining time) and waits until the store says so. */
async function expire(
  store: ContractStore,
  lease: { sessionId: string; hostId: string; generation: number },
) {
  expect(await store.renewLeases(lease.hostId, [lease], 1)).toEqual({ renewed: [lease], lost: [] });
  await expect.poll(() => store.leaseHolder(lease.sessionId), { timeout: 20_000, interval: 50 }).toBeNull();
}

describeContract("lease rules at their edges", (backend) => {
  const twoHosts = leaseWriters(backend, S);

  async function take(store: ContractStore, hostId: string) {
    const outcome = await store.acquireLease(S, hostId, LONG);
    if (outcome.status !== "acquired") throw new Error(outcome.status);
    return outcome;
  }

  /** The commit notices of session S that `store` hears from now on (its own and other hosts'). */
  function heardBy(store: ContractStore): CommitNotice[] {
    const notices: CommitNotice[] = [];
    store.subscribe(S, (notice) => notices.push(notice));
    return notices;
  }

  it("a lease time that is not a whole positive number of milliseconds is refused before anything runs", async () => {
    const { a } = await twoHosts();
    const { lease } = await take(a, "host-a");
    for (const ttl of [0, -5, 1.5, Number.NaN]) {
      expect(() => a.acquireLease(S, "host-a", ttl)).toThrow(RangeError);
      expect(() => a.renewLeases("host-a", [lease], ttl)).toThrow(RangeError);
    }
    // a caller's bug, named with the value it passed
    expect(() => a.acquireLease(S, "host-a", 0)).toThrow("lease ttl 0 ms is not a positive integer");
    // nothing was renewed or taken by the refused calls
    expect(await a.leaseHolder(S)).toMatchObject({ hostId: "host-a", generation: 1 });
  });

  it("the lease of a deleted session is refused retired, of an unknown one not_found", async () => {
    const { a } = await twoHosts();
    await a.create({ sessionId: "gone", owner: "alice", model: "m" });
    await a.delete("gone");
    expect(await a.acquireLease("gone", "host-a", LONG)).toEqual({ status: "retired" });
    expect(await a.acquireLease("nobody", "host-a", LONG)).toEqual({ status: "not_found" });
    expect(await a.leaseHolder("gone")).toBeNull();
  });

  it("a take answers the expiry the store keeps, and so does a take that renews", async () => {
    const { a } = await twoHosts();
    const first = await take(a, "host-a");
    expect(await a.leaseHolder(S)).toEqual({ ...first.lease, expiresAt: first.expiresAt });
    const again = await take(a, "host-a");
    expect(again.lease).toEqual(first.lease);
    expect(again.expiresAt).toBeGreaterThanOrEqual(first.expiresAt);
    expect(await a.leaseHolder(S)).toEqual({ ...first.lease, expiresAt: again.expiresAt });
  });

  it("a take by the holder renews: no takeover, its running turn and jobs go on, nothing announced", async () => {
    const { a } = await twoHosts();
    const first = await take(a, "host-a");
    await a.append(
      S,
      [turnStart("t1"), { type: "job/started", data: { jobId: "j1", turnId: "t1", label: "build" } }],
      { fence: first.lease },
    );
    const seen: LiveStateNotice[] = [];
    a.subscribeLive((notice) => seen.push(notice));
    const again = await a.acquireLease(S, "host-a", LONG);
    expect(again).toEqual({
      status: "acquired",
      lease: first.lease,
      expiresAt: expect.any(Number),
      takeover: null,
    });
    expect(await head(a)).toBe(3);
    expect((await a.projection(S))?.openTurnId).toBe("t1");
    expect(seen).toEqual([]);
  });

  it("renewing no leases answers nothing renewed and nothing lost", async () => {
    const { a } = await twoHosts();
    expect(await a.renewLeases("host-a", [], LONG)).toEqual({ renewed: [], lost: [] });
  });

  it("a lease renewed in another host's name is reported lost and left as it was", async () => {
    const { a } = await twoHosts();
    const { lease, expiresAt } = await take(a, "host-a");
    const named = { ...lease, hostId: "host-b" };
    expect(await a.renewLeases("host-a", [named], 2 * LONG)).toEqual({ renewed: [], lost: [named] });
    expect(await a.leaseHolder(S)).toEqual({ ...lease, expiresAt });
    expect(await a.renewLeases("host-a", [named, lease], LONG)).toEqual({ renewed: [lease], lost: [named] });
  });

  it("an append fenced by a lease taken just before it, in the same transaction, lands", async () => {
    const { a } = await twoHosts();
    // submitted together: one transaction, whose lease row changed after its lock was granted
    const [taken, appended] = await Promise.all([
      a.acquireLease(S, "host-a", LONG),
      a.append(S, [turnStart("t")], { fence: { sessionId: S, hostId: "host-a", generation: 1 } }),
    ]);
    expect(taken).toMatchObject({ status: "acquired", lease: { generation: 1 } });
    expect(appended).toMatchObject({ status: "appended", events: [{ seq: 2 }] });
  });

  it("a takeover with no running turn or job appends nothing", async () => {
    const { a, b } = await twoHosts();
    const mine = await take(a, "host-a");
    await a.append(S, [userMessage("hi")], { fence: mine.lease });
    await expire(a, mine.lease);
    expect(await b.acquireLease(S, "host-b", LONG)).toMatchObject({
      status: "acquired",
      lease: { generation: 2 },
      takeover: { fromHost: "host-a", interruptedTurnId: null },
    });
    expect(await head(b)).toBe(2);
  });

  it("a takeover with no running turn or job tells the commit listeners nothing", async () => {
    const { a, b } = await twoHosts();
    const notices = heardBy(b);
    const appended = () => notices.flatMap((n) => (n.kind === "append" ? [n.events.map((e) => e.seq)] : []));
    const mine = await take(a, "host-a");
    await a.append(S, [userMessage("hi")], { fence: mine.lease });
    // B has caught up with A's append before it takes over
    await expect.poll(() => appended(), { timeout: 10_000, interval: 20 }).toEqual([[2]]);
    await expire(a, mine.lease);
    const taken = await take(b, "host-b");
    expect(taken.takeover).toEqual({ fromHost: "host-a", interruptedTurnId: null });
    // the next append's notice is heard after any the takeover caused
    await b.append(S, [turnStart("t2")], { fence: taken.lease });
    await expect.poll(() => appended().at(-1), { timeout: 10_000, interval: 20 }).toEqual([3]);
    expect(appended()).toEqual([[2], [3]]);
  });

  it("a takeover's interrupted events reach the commit listeners, in one notice", async () => {
    const { a, b } = await twoHosts();
    const notices = heardBy(b);
    /** The events of the append notices B heard that carry a seq above `seq`. */
    const after = (seq: number) =>
      notices.flatMap((n) => (n.kind === "append" && n.events.some((e) => e.seq > seq) ? [n.events] : []));
    const mine = await take(a, "host-a");
    await a.append(
      S,
      [turnStart("t1"), { type: "job/started", data: { jobId: "j1", turnId: "t1", label: "build" } }],
      { fence: mine.lease },
    );
    // B has caught up with A's append before it takes over
    await expect.poll(() => after(2).length, { timeout: 10_000, interval: 20 }).toBe(1);
    await expire(a, mine.lease);
    const taken = await b.acquireLease(S, "host-b", LONG);
    expect(taken).toMatchObject({ takeover: { fromHost: "host-a", interruptedTurnId: "t1" } });
    expect(
      after(3).map((events) => events.map((e) => [e.seq, e.type, (e.data as { state?: string }).state])),
    ).toEqual([
      [
        [4, "job/ended", "interrupted"],
        [5, "turn/end", "interrupted"],
      ],
    ]);
  });

  it("a takeover of a turn parked on a person ends its running job and reports no interrupted turn", async () => {
    const { a, b } = await twoHosts();
    const mine = await take(a, "host-a");
    await a.append(
      S,
      [
        turnStart("t1"),
        { type: "job/started", data: { jobId: "j1", turnId: "t1", label: "build" } },
        {
          type: "interaction/requested",
          data: { turnId: "t1", interactionId: "ask", kind: "approval", action: "x" },
        },
      ],
      { fence: mine.lease },
    );
    await expire(a, mine.lease);
    expect(await b.acquireLease(S, "host-b", LONG)).toMatchObject({
      status: "acquired",
      takeover: { fromHost: "host-a", interruptedTurnId: null },
    });
    const read = await readWholeLog(b, S);
    const tail = read.status === "ok" ? read.events.slice(-1) : [];
    // the job it ended is the one that ran, named by its id
    expect(tail.map((e) => [e.type, e.data])).toEqual([
      ["job/ended", expect.objectContaining({ jobId: "j1", state: "interrupted" })],
    ]);
    expect((await b.projection(S))?.openTurnId).toBe("t1");
  });

  it("lease pages hold at most the limit in session order, and only a full page names where the next starts", async () => {
    const { a } = await twoHosts();
    const ids = [S, "s1", "s2", "s3"];
    for (const id of ids.slice(1)) await a.create({ sessionId: id, owner: "bob", model: "m" });
    for (const id of ids) await a.acquireLease(id, "host-a", LONG);
    const sessionsOf = (page: { leases: { sessionId: string }[] }) => page.leases.map((l) => l.sessionId);
    const first = await a.leasePage(null, 3);
    expect(sessionsOf(first)).toEqual(["s", "s1", "s2"]);
    expect(first.next).toBe("s2");
    const rest = await a.leasePage(first.next, 3);
    expect(sessionsOf(rest)).toEqual(["s3"]);
    expect(rest.next).toBeNull();
    // a page filled exactly by the last leases cannot know it is the last: the next one is empty
    const whole = await a.leasePage(null, 4);
    expect(sessionsOf(whole)).toEqual(ids);
    expect(whole.next).toBe("s3");
    expect(await a.leasePage(whole.next, 4)).toEqual({ leases: [], next: null });
    expect(await a.leasePage(null, 0)).toEqual({ leases: [], next: null });
  });

  it("releasing a lease that is not the current one changes nothing and announces nothing", async () => {
    const { a, b } = await twoHosts();
    const seen: LiveStateNotice[] = [];
    a.subscribeLive((notice) => seen.push(notice));
    const mine = await take(a, "host-a");
    // the current generation in another host's name
    await a.releaseLease({ ...mine.lease, hostId: "host-b" });
    expect(await a.leaseHolder(S)).toEqual({ ...mine.lease, expiresAt: mine.expiresAt });
    await a.releaseLease(mine.lease);
    expect(seen).toEqual([
      { kind: "lease", owner: "alice", sessionId: S, hostId: "host-a", generation: 1 },
      { kind: "lease", owner: "alice", sessionId: S, hostId: null, generation: 1 },
    ]);
    // a generation another host took since
    const theirs = await take(b, "host-b");
    await a.releaseLease(mine.lease);
    expect(await a.leaseHolder(S)).toEqual({ ...theirs.lease, expiresAt: theirs.expiresAt });
  });
});
