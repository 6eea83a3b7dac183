import { describe, expect, it } from "vitest";
import { ReadinessProbe } from "../../src/operations/readiness-probe.js";

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
    expect(failing.current()).toMatchObject({ ready: false, reason: "attempt to write a readonly database" });
    failing.stop();
    expect(failing.current()).toMatchObject({ ready: false, reason: "shutting down" });
  });
});
