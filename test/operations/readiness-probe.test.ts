import { describe, expect, it } from "vitest";
import { ReadinessProbe } from "../../src/operations/readiness-probe.js";
import { until } from "../support/until.js";

describe("ReadinessProbe", () => {
  it("answers from the last check: ready after a success, not ready after a failure or when stale", async () => {
    let now = 1_000;
    let failure: Error | undefined;
    let checks = 0;
    const probe = new ReadinessProbe(
      () => {
        checks++;
        if (failure) throw failure;
      },
      60_000,
      () => now,
    );
    expect(probe.current()).toMatchObject({ ready: false, reason: "not checked yet" });
    await probe.start();
    try {
      expect(probe.current()).toEqual({ ready: true, checkedAt: 1_000 });
      // answered from the cache: no check per question
      probe.current();
      expect(checks).toBe(1);
      now += 3 * 60_000 + 1;
      expect(probe.current()).toMatchObject({
        ready: false,
        reason: "last check is stale",
        checkedAt: 1_000,
      });
    } finally {
      probe.stop();
    }
    failure = new Error("attempt to write a readonly database");
    const failing = new ReadinessProbe(() => {
      if (failure) throw failure;
    }, 60_000);
    await failing.start();
    expect(failing.current()).toMatchObject({ ready: false, code: "db_unavailable" });
    failing.stop();
    expect(failing.current()).toMatchObject({ ready: false, reason: "shutting down" });
  });

  it("stays not ready once stopped, whatever a check still under way then answers", async () => {
    let calls = 0;
    const pending: { settle(): void; fail(): void }[] = [];
    const probe = new ReadinessProbe(() => {
      calls++;
      if (calls === 1) return;
      return new Promise<void>((resolve, reject) => {
        pending.push({ settle: resolve, fail: () => reject(new Error("connection reset")) });
      });
    }, 5);
    await probe.start();
    await until(() => pending.length === 1);
    // the host begins to close while its database round trip is still out
    probe.stop();
    pending[0]?.settle();
    await new Promise((resolve) => setImmediate(resolve));
    expect(probe.current()).toMatchObject({ ready: false, reason: "shutting down" });

    // stopped while its first check is out: no timer keeps checking a closed database
    let first: (() => void) | undefined;
    let checks = 0;
    const starting = new ReadinessProbe(() => {
      checks++;
      return new Promise<void>((resolve) => {
        first ??= resolve;
      });
    }, 5);
    const started = starting.start();
    starting.stop();
    first?.();
    await started;
    expect(starting.current()).toMatchObject({ ready: false, reason: "shutting down" });
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(checks).toBe(1);
  });
});
