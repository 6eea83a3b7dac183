import { pino } from "pino";
import { afterEach, describe, expect, it, vi } from "vitest";
import { HostLeases } from "../../src/host/host-leases.js";
import { RecordingLeaseStore } from "./recording-lease-store.js";

describe("session lease renewal schedule", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it("renews every held lease together about every third of the ttl, and reports the lost ones once", async () => {
    vi.useFakeTimers({ now: 0 });
    const store = new RecordingLeaseStore();
    const lost: string[] = [];
    const leases = new HostLeases({
      store,
      hostId: "h",
      ttlMs: 9_000,
      logger: pino({ enabled: false }),
      onLost: (lease) => lost.push(lease.sessionId),
    });
    leases.start();
    await leases.acquire("s1");
    await leases.acquire("s2");
    await vi.advanceTimersByTimeAsync(2_999);
    expect(store.renewals).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(store.renewals).toEqual([{ at: 3_000, sessions: ["s1", "s2"] }]);
    store.lose.add("s2");
    await vi.advanceTimersByTimeAsync(3_000);
    expect(lost).toEqual(["s2"]);
    expect(leases.fence("s2")).toBeNull();
    expect(leases.fence("s1")).toEqual({ fence: { sessionId: "s1", hostId: "h", generation: 1 } });
    await vi.advanceTimersByTimeAsync(3_000);
    expect(store.renewals.map((r) => r.sessions)).toEqual([["s1", "s2"], ["s1", "s2"], ["s1"]]);
    expect(lost).toEqual(["s2"]);
    // stopped renewals (a paused host) ask nothing more; releasing gives the held ones back
    leases.stopRenewals();
    await vi.advanceTimersByTimeAsync(30_000);
    expect(store.renewals).toHaveLength(3);
    await leases.releaseAll();
    expect(store.released).toEqual(["s1"]);
  });

  it("a release and a new take of one session run in order, and a release the session still needs is skipped", async () => {
    const store = new RecordingLeaseStore();
    const leases = new HostLeases({
      store,
      hostId: "h",
      logger: pino({ enabled: false }),
      onLost: () => undefined,
    });
    await leases.acquire("s1");
    const release = leases.release("s1");
    const again = leases.acquire("s1");
    await Promise.all([release, again]);
    expect(store.released).toEqual(["s1"]);
    expect(leases.lease("s1")?.generation).toBe(2);
    await leases.release("s1", () => true);
    expect(store.released).toEqual(["s1"]);
    expect(leases.lease("s1")).toBeDefined();
  });
});
