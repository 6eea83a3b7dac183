import { describe, expect, it, vi } from "vitest";
import { ReadinessProbe } from "../../src/operations/readiness-probe.js";
import { capturedLogger } from "../support/log-capture.js";
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
      // stale only past three intervals: at exactly three it still answers ready
      now += 3 * 60_000;
      expect(probe.current()).toEqual({ ready: true, checkedAt: 1_000 });
      now += 1;
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

    // a check that fails after the host began to close does not report the database down either
    const failingLate = new ReadinessProbe(() => {
      calls++;
      if (calls === 3) return;
      return new Promise<void>((resolve, reject) => {
        pending.push({ settle: resolve, fail: () => reject(new Error("connection reset")) });
      });
    }, 5);
    await failingLate.start();
    await until(() => pending.length === 2);
    failingLate.stop();
    pending[1]?.fail();
    await new Promise((resolve) => setImmediate(resolve));
    expect(failingLate.current()).toMatchObject({ ready: false, reason: "shutting down" });

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

  it("is ready again when a failed check passes, with or without a logger, and says so once", async () => {
    let failure: Error | undefined;
    const { logger, lines } = capturedLogger();
    for (const log of [undefined, logger]) {
      failure = new Error("database is locked");
      let now = 1_000;
      const probe = new ReadinessProbe(
        () => {
          if (failure) throw failure;
        },
        5,
        () => now,
        log,
      );
      await probe.start();
      try {
        expect(probe.current()).toMatchObject({ ready: false, code: "db_unavailable" });
        // a later check of the interval passes
        now = 2_000;
        failure = undefined;
        await vi.waitFor(() => expect(probe.current()).toEqual({ ready: true, checkedAt: 2_000 }));
      } finally {
        probe.stop();
      }
    }
    expect(lines.map((l) => [l.level, l.msg])).toEqual([
      [40, "readiness check failed: not ready"],
      [30, "readiness check passes again: ready"],
    ]);
  });

  it("starts no second check while one is still out, however many intervals pass", async () => {
    vi.useFakeTimers();
    try {
      let checks = 0;
      let release: (() => void) | undefined;
      const probe = new ReadinessProbe(() => {
        checks++;
        if (checks === 1) return;
        return new Promise<void>((resolve) => {
          release = resolve;
        });
      }, 5);
      await probe.start();
      try {
        // twenty intervals while the second check hangs
        await vi.advanceTimersByTimeAsync(100);
        expect(checks).toBe(2);
        release?.();
        await vi.advanceTimersByTimeAsync(5);
        expect(checks).toBe(3);
      } finally {
        probe.stop();
      }
    } finally {
      vi.useRealTimers();
    }
  });
});
