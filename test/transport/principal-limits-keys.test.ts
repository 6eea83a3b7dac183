import { describe, expect, it } from "vitest";
import type { Principal } from "../../src/host/principal.js";
import { PrincipalLimits } from "../../src/transport/principal-limits.js";

/** Per-principal limits on their own: what they are counted by, and how many buckets they keep. */

// an app's own `authenticate` returns a new object for every request: the limits must not notice
const alice = (): Principal => Object.freeze({ name: "alice", admin: false });

function limits(options: ConstructorParameters<typeof PrincipalLimits>[0]) {
  const clock = { now: 0 };
  return { limits: new PrincipalLimits(options, () => clock.now), clock };
}

describe("per-principal limits", () => {
  it("count a principal by its name, whatever object stands for it; an admin of that name is exempt", () => {
    const { limits: l } = limits({
      maxSocketsPerPrincipal: 2,
      sessionCreateBurst: 2,
      sessionCreatePerSecond: 1,
    });
    const releases = [l.acquireSocket(alice()), l.acquireSocket(alice())];
    expect(releases.every((release) => release !== undefined)).toBe(true);
    expect(l.acquireSocket(alice())).toBeUndefined();
    expect(l.acquireSocket({ name: "bob", admin: false })).toBeDefined();
    expect(l.acquireSocket({ name: "alice", admin: true })).toBeDefined();
    // a release counts once, however often it is called
    releases[0]!();
    releases[0]!();
    expect(l.acquireSocket(alice())).toBeDefined();
    expect(l.acquireSocket(alice())).toBeUndefined();

    l.takeSessionCreation(alice());
    l.takeSessionCreation(alice());
    expect(() => l.takeSessionCreation(alice())).toThrow(expect.objectContaining({ code: "rate_limited" }));
    l.takeSessionCreation({ name: "bob", admin: false });
    for (let i = 0; i < 5; i++) l.takeSessionCreation({ name: "alice", admin: true });
  });

  it("count a principal's searches running by its name until each is released, the admin exempt", () => {
    const { limits: l } = limits({ maxSearchesPerPrincipal: 2 });
    const releases = [l.takeSearch(alice()), l.takeSearch(alice())];
    expect(() => l.takeSearch(alice())).toThrow(
      expect.objectContaining({ code: "overloaded", data: { limit: "searches_per_principal", max: 2 } }),
    );
    l.takeSearch({ name: "bob", admin: false });
    for (let i = 0; i < 5; i++) l.takeSearch({ name: "alice", admin: true });
    // a release counts once, however often it is called
    releases[0]!();
    releases[0]!();
    l.takeSearch(alice());
    expect(() => l.takeSearch(alice())).toThrow(expect.objectContaining({ code: "overloaded" }));
  });

  it("keep a bounded number of buckets: a full one is dropped, one still refilling is not", () => {
    // a bucket of 2 refills 1 a second: one creation is refilled after 1 s, two after 2 s
    const { limits: l, clock } = limits({ sessionCreateBurst: 2, sessionCreatePerSecond: 1 });
    for (let i = 0; i < 1_024; i++) l.takeSessionCreation({ name: `user-${i}`, admin: false });
    expect(l.bucketCount).toBe(1_024);
    // emptied now: kept through every prune while it refills
    l.takeSessionCreation({ name: "user-0", admin: false });
    clock.now = 999;
    for (let i = 1_024; i < 5_000; i++) l.takeSessionCreation({ name: `user-${i}`, admin: false });
    expect(l.bucketCount).toBe(5_000);
    expect(() => l.takeSessionCreation({ name: "user-0", admin: false })).toThrow(
      expect.objectContaining({ code: "rate_limited" }),
    );
    // every bucket refilled: the next new principal's bucket drops them all
    clock.now = 10_000;
    l.takeSessionCreation({ name: "newcomer", admin: false });
    expect(l.bucketCount).toBe(1);
    for (let round = 1; round <= 10; round++) {
      clock.now = 10_000 + round * 3_000;
      for (let i = 0; i < 3_000; i++) l.takeSessionCreation({ name: `round-${round}-${i}`, admin: false });
      expect(l.bucketCount).toBeLessThanOrEqual(2 * 3_000);
    }
  });

  it("a clock stepped back takes nothing from a bucket (it was rate limited for as long as the step)", () => {
    const { limits: l, clock } = limits({ sessionCreateBurst: 2, sessionCreatePerSecond: 1 });
    clock.now = 10 * 3_600_000;
    l.takeSessionCreation(alice());
    // NTP steps the wall clock back an hour
    clock.now -= 3_600_000;
    expect(() => l.takeSessionCreation(alice())).not.toThrow();
    expect(() => l.takeSessionCreation(alice())).toThrow(expect.objectContaining({ code: "rate_limited" }));
    clock.now += 1_000;
    expect(() => l.takeSessionCreation(alice())).not.toThrow();
  });

  it("refill a bucket at its rate up to its size, and say when the next creation will pass", () => {
    const { limits: l, clock } = limits({ sessionCreateBurst: 3, sessionCreatePerSecond: 2 });
    const take = () => l.takeSessionCreation(alice());
    const refusal = () => {
      try {
        take();
      } catch (err) {
        const { code, message, data } = err as { code: string; message: string; data: unknown };
        return { code, message, data };
      }
      throw new Error("passed");
    };
    clock.now = 1_000;
    for (let i = 0; i < 3; i++) take();
    expect(refusal()).toEqual({
      code: "rate_limited",
      message: "at most 2 new sessions per second (bursts of 3); retry in 500 ms",
      data: { retryAfterMs: 500 },
    });
    // a quarter of a second refills half a creation: half of the wait is left
    clock.now = 1_250;
    expect(refusal().data).toEqual({ retryAfterMs: 250 });
    clock.now = 1_500;
    take();
    expect(refusal().data).toEqual({ retryAfterMs: 500 });
    // a long pause refills to the bucket's size, no more
    clock.now = 100_000;
    for (let i = 0; i < 3; i++) take();
    expect(refusal().code).toBe("rate_limited");
  });

  it("default to 64 sockets and bursts of 200 creations", () => {
    // and to the process clock
    const l = new PrincipalLimits();
    for (let i = 0; i < 64; i++) expect(l.acquireSocket(alice())).toBeDefined();
    expect(l.acquireSocket(alice())).toBeUndefined();
    for (let i = 0; i < 200; i++) l.takeSessionCreation(alice());
    expect(() => l.takeSessionCreation(alice())).toThrow(expect.objectContaining({ code: "rate_limited" }));
  });

  it("keep no count for a principal whose sockets all closed", () => {
    const { limits: l } = limits({ maxSocketsPerPrincipal: 2 });
    const releases = Array.from({ length: 100 }, (_, i) => l.acquireSocket({ name: `p${i}`, admin: false }));
    const twice = l.acquireSocket({ name: "p0", admin: false });
    expect(l.socketHolderCount).toBe(100);
    for (const release of releases) release!();
    expect(l.socketHolderCount).toBe(1);
    twice!();
    expect(l.socketHolderCount).toBe(0);
  });

  it("prune below 1,024 buckets never, at 1,024 once due by count or by a refill's time, then at twice what was left", () => {
    // a bucket of 4 refills 2 a second: one refill takes 2 s
    const shape = { sessionCreateBurst: 4, sessionCreatePerSecond: 2 };
    const take = (l: PrincipalLimits, name: string, n: number) => {
      for (let i = 0; i < n; i++) l.takeSessionCreation({ name, admin: false });
    };
    const a = limits(shape);
    for (let i = 0; i < 1_023; i++) take(a.limits, `u${i}`, 1);
    a.clock.now = 5_000;
    // full, and a refill's time has passed, but 1,023 buckets are kept as they are
    take(a.limits, "x1", 1);
    expect(a.limits.bucketCount).toBe(1_024);
    // at 1,024 the full ones go; x1, still refilling, stays
    take(a.limits, "x2", 1);
    expect(a.limits.bucketCount).toBe(2);

    const b = limits(shape);
    b.clock.now = 10_000;
    // the 1,025th finds 1,024 none of which is full: the next prune waits for 2,048 or 2 s
    for (let i = 0; i < 2_000; i++) take(b.limits, `p${i}`, 3);
    b.clock.now = 11_999;
    take(b.limits, "q1", 3);
    expect(b.limits.bucketCount).toBe(2_001);
    b.clock.now = 12_000;
    take(b.limits, "q2", 3);
    expect(b.limits.bucketCount).toBe(2);
    // 1.5 s later q1 and q2 are full (q2 exactly), and 1,024 buckets make a prune due by count
    b.clock.now = 13_500;
    for (let i = 0; i < 1_023; i++) take(b.limits, `r${i}`, 3);
    expect(b.limits.bucketCount).toBe(1_023);
  });
});
