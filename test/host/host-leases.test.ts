import { afterEach, describe, expect, it, vi } from "vitest";
import { HostLeases } from "../../src/host/host-leases.js";
import type { LeaseMeters } from "../../src/host/host-meters.js";
import type { SessionLease } from "../../src/store/session-lease.js";
import { HostMetrics } from "../../src/transport/metrics.js";
import { gate } from "../support/gate.js";
import { capturedLogger } from "../support/log-capture.js";
import { RecordingLeaseStore } from "./recording-lease-store.js";

/** What a host makes of its lease store's answers: losses, refusals, failures, and their order. */

const TTL_MS = 9_000;

function hostLeases(options: { sweep?: () => Promise<void>; meters?: LeaseMeters } = {}) {
  const store = new RecordingLeaseStore();
  const log = capturedLogger();
  const lost: SessionLease[] = [];
  const leases = new HostLeases({
    store,
    hostId: "h",
    ttlMs: TTL_MS,
    logger: log.logger,
    onLost: (lease) => lost.push(lease),
    ...(options.sweep ? { sweep: options.sweep } : {}),
    ...(options.meters ? { meters: options.meters } : {}),
  });
  const logged = (msg: string) => log.lines.filter((line) => line.msg === msg);
  return { store, leases, lost, logged };
}

afterEach(() => {
  vi.useRealTimers();
});

describe("session leases held by a host", () => {
  it("a late fenced notice for an older lease leaves the newer one alone; the current one's loss is reported once", async () => {
    const { leases, lost } = hostLeases();
    const first = await leases.acquire("s1");
    if (first.status !== "acquired") throw new Error(first.status);
    await leases.release("s1");
    await leases.acquire("s1");
    const current = leases.lease("s1")!;
    expect(current.generation).toBe(first.lease.generation + 1);
    leases.fenced(first.lease);
    expect(leases.fence("s1")).toEqual({ fence: current });
    expect(lost).toEqual([]);
    leases.fenced(current);
    expect(leases.fence("s1")).toBeNull();
    expect(lost).toEqual([current]);
    leases.fenced(current);
    leases.fenced({ sessionId: "never held", hostId: "h", generation: 1 });
    expect(lost).toEqual([current]);
  });

  it("a take the store answers held keeps nothing; a takeover is logged with the host and turn it came from", async () => {
    const { store, leases, logged } = hostLeases();
    store.nextAcquire = "held";
    expect((await leases.acquire("s1")).status).toBe("held");
    expect(leases.fence("s1")).toBeNull();
    await leases.renew();
    expect(store.renewals).toEqual([]);
    expect(logged("renewing session leases failed")).toEqual([]);
    await leases.acquire("s2");
    expect(logged("took over an expired session lease")).toEqual([]);
    store.nextAcquire = { takeoverFrom: "gone", interruptedTurnId: "t1" };
    await leases.acquire("s3");
    expect(leases.lease("s3")).toBeDefined();
    expect(logged("took over an expired session lease")).toEqual([
      expect.objectContaining({ sessionId: "s3", fromHost: "gone", interruptedTurnId: "t1" }),
    ]);
  });

  it("a failed release gives the lease up here all the same, and says so", async () => {
    const { store, leases, logged } = hostLeases();
    await leases.acquire("s1");
    store.releaseFails = new Error("connection lost");
    await leases.release("s1");
    expect(store.released).toEqual(["s1"]);
    expect(leases.lease("s1")).toBeUndefined();
    expect(logged("releasing a session lease failed")).toEqual([
      expect.objectContaining({ sessionId: "s1" }),
    ]);
  });

  it("operations on one session wait for the one before, also when issued after an earlier one finished", async () => {
    const { store, leases } = hostLeases();
    await leases.acquire("s1");
    const held = gate();
    store.hold = held.promise;
    await leases.release("s1");
    const again = leases.acquire("s1");
    // the release has settled; a release issued now must still wait for the take behind it
    await new Promise((resolve) => setImmediate(resolve));
    const third = leases.release("s1");
    store.hold = undefined;
    held.open();
    await Promise.all([again, third]);
    expect(store.acquired).toEqual(["s1", "s1"]);
    expect(store.released).toEqual(["s1", "s1"]);
    expect(leases.lease("s1")).toBeUndefined();
  });
});

describe("the renewal clock", () => {
  it("a round with nothing held asks the store nothing", async () => {
    const { store, leases } = hostLeases();
    await leases.renew();
    await leases.acquire("s1");
    await leases.release("s1");
    await leases.renew();
    expect(store.renewals).toEqual([]);
  });

  it("a renewal that fails keeps the leases and says so; the next round renews them", async () => {
    vi.useFakeTimers({ now: 0 });
    const { store, leases, lost, logged } = hostLeases();
    leases.start();
    await leases.acquire("s1");
    store.renewFails = new Error("timeout");
    await vi.advanceTimersByTimeAsync(TTL_MS / 3);
    expect(logged("renewing session leases failed")).toEqual([expect.objectContaining({ leases: 1 })]);
    expect(leases.lease("s1")).toBeDefined();
    await vi.advanceTimersByTimeAsync(TTL_MS / 3);
    expect(store.renewals.map((r) => r.sessions)).toEqual([["s1"], ["s1"]]);
    expect(lost).toEqual([]);
    leases.stopRenewals();
  });

  it("a run of failed renewal rounds is one warning, and the round that renews again says so with how many failed", async () => {
    vi.useFakeTimers({ now: 0 });
    const { store, leases, logged } = hostLeases();
    leases.start();
    await leases.acquire("s1");
    store.renewalsDown = new Error("connection terminated");
    await vi.advanceTimersByTimeAsync(3 * (TTL_MS / 3));
    expect(store.renewals).toHaveLength(3);
    expect(logged("renewing session leases failed")).toEqual([
      expect.objectContaining({
        leases: 1,
        err: expect.objectContaining({ message: "connection terminated" }),
      }),
    ]);
    expect(logged("renewing session leases works again")).toEqual([]);
    store.renewalsDown = undefined;
    await vi.advanceTimersByTimeAsync(2 * (TTL_MS / 3));
    expect(logged("renewing session leases works again")).toEqual([expect.objectContaining({ failures: 3 })]);
    // the next run is told again
    store.renewalsDown = new Error("connection terminated");
    await vi.advanceTimersByTimeAsync(TTL_MS / 3);
    expect(logged("renewing session leases failed")).toHaveLength(2);
    leases.stopRenewals();
  });

  it("a run of failed sweeps is one warning, and the sweep that works again says so with how many failed", async () => {
    vi.useFakeTimers({ now: 0 });
    let failing = true;
    const { leases, logged } = hostLeases({
      sweep: async () => {
        if (failing) throw new Error("database away");
      },
    });
    leases.start();
    await vi.advanceTimersByTimeAsync(4 * (TTL_MS / 3));
    expect(logged("sweeping sessions nobody owns failed")).toHaveLength(1);
    failing = false;
    await vi.advanceTimersByTimeAsync(2 * (TTL_MS / 3));
    expect(logged("sweeping sessions nobody owns works again")).toEqual([
      expect.objectContaining({ failures: 4 }),
    ]);
    leases.stopRenewals();
  });

  it("stopped while a round is in flight, no round follows it", async () => {
    vi.useFakeTimers({ now: 0 });
    const { store, leases } = hostLeases();
    await leases.acquire("s1");
    const held = gate();
    store.hold = held.promise;
    leases.start();
    await vi.advanceTimersByTimeAsync(TTL_MS / 3);
    leases.stopRenewals();
    store.hold = undefined;
    held.open();
    await vi.advanceTimersByTimeAsync(10 * TTL_MS);
    expect(store.renewals).toHaveLength(1);
  });

  it("sweeps after each round while the clock runs; a failed sweep says so and the clock goes on", async () => {
    vi.useFakeTimers({ now: 0 });
    let sweeps = 0;
    const { store, leases, logged } = hostLeases({
      sweep: async () => {
        sweeps += 1;
        if (sweeps === 1) throw new Error("database away");
      },
    });
    await leases.acquire("s1");
    leases.start();
    await vi.advanceTimersByTimeAsync(TTL_MS / 3);
    expect(sweeps).toBe(1);
    expect(logged("sweeping sessions nobody owns failed")).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(TTL_MS / 3);
    expect([store.renewals.length, sweeps]).toEqual([2, 2]);
    leases.stopRenewals();
    await leases.renew();
    await vi.advanceTimersByTimeAsync(10 * TTL_MS);
    expect([store.renewals.length, sweeps]).toEqual([3, 2]);
  });
});

describe("a host's lease metrics", () => {
  it("count the leases held after every change, takeovers, losses by reason and failed renewals", async () => {
    const metrics = new HostMetrics();
    const { store, leases } = hostLeases({ meters: metrics });
    const series = async () => {
      const text = await metrics.registry.metrics();
      return text.split("\n").filter((line) => /^sessionmux_lease/.test(line));
    };
    expect(await series()).toEqual([
      "sessionmux_leases_held 0",
      "sessionmux_lease_takeovers_total 0",
      'sessionmux_leases_lost_total{reason="renewal_refused"} 0',
      'sessionmux_leases_lost_total{reason="fenced"} 0',
      "sessionmux_lease_renewal_failures_total 0",
    ]);
    await leases.acquire("s1");
    store.nextAcquire = { takeoverFrom: "gone", interruptedTurnId: "t1" };
    await leases.acquire("s2");
    await leases.acquire("s3");
    store.nextAcquire = "held";
    await leases.acquire("s4");
    // taking a lease held again counts it once
    await leases.acquire("s3");
    expect(await series()).toEqual([
      "sessionmux_leases_held 3",
      "sessionmux_lease_takeovers_total 1",
      'sessionmux_leases_lost_total{reason="renewal_refused"} 0',
      'sessionmux_leases_lost_total{reason="fenced"} 0',
      "sessionmux_lease_renewal_failures_total 0",
    ]);
    store.renewFails = new Error("connection lost");
    await leases.renew();
    store.lose.add("s1");
    await leases.renew();
    leases.fenced(leases.lease("s2")!);
    // a late notice of a lease gone already counts nothing more
    leases.fenced({ sessionId: "s2", hostId: "h", generation: 2 });
    expect((await series())[0]).toBe("sessionmux_leases_held 1");
    await leases.release("s3");
    await leases.release("s3");
    expect(await series()).toEqual([
      "sessionmux_leases_held 0",
      "sessionmux_lease_takeovers_total 1",
      'sessionmux_leases_lost_total{reason="renewal_refused"} 1',
      'sessionmux_leases_lost_total{reason="fenced"} 1',
      "sessionmux_lease_renewal_failures_total 1",
    ]);
  });
});
