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
});
