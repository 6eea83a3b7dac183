import { getEventListeners } from "node:events";
import { afterEach, beforeEach, describe, expect, test, vi } from "vitest";
import { abortableSleep } from "../../src/agents/abortable-sleep.js";

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

/** Whether the promise has settled, and how. */
function watch(promise: Promise<void>): { state: string; reason?: unknown } {
  const seen: { state: string; reason?: unknown } = { state: "pending" };
  promise.then(
    () => {
      seen.state = "resolved";
    },
    (reason: unknown) => {
      seen.state = "rejected";
      seen.reason = reason;
    },
  );
  return seen;
}

describe("a sleep a signal can cut short", () => {
  test("resolves once its time has passed, not before; leaves no timer or listener", async () => {
    const controller = new AbortController();
    const seen = watch(abortableSleep(1_000, controller.signal));
    expect(getEventListeners(controller.signal, "abort")).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(999);
    expect(seen.state).toBe("pending");
    await vi.advanceTimersByTimeAsync(1);
    expect(seen.state).toBe("resolved");
    expect(vi.getTimerCount()).toBe(0);
    expect(getEventListeners(controller.signal, "abort")).toHaveLength(0);
    // an abort after it ended changes nothing
    controller.abort(new Error("late"));
    await vi.advanceTimersByTimeAsync(0);
    expect(seen.state).toBe("resolved");
  });

  test("rejects with the signal's reason as soon as it aborts, and clears its timer", async () => {
    const controller = new AbortController();
    const seen = watch(abortableSleep(1_000, controller.signal));
    await vi.advanceTimersByTimeAsync(10);
    const reason = new Error("cancelled");
    controller.abort(reason);
    await vi.advanceTimersByTimeAsync(0);
    expect(seen).toEqual({ state: "rejected", reason });
    expect(vi.getTimerCount()).toBe(0);
    expect(getEventListeners(controller.signal, "abort")).toHaveLength(0);
  });

  test("an aborted signal rejects at once with its reason, starting no timer", async () => {
    const reason = new Error("already");
    const seen = watch(abortableSleep(1_000, AbortSignal.abort(reason)));
    expect(vi.getTimerCount()).toBe(0);
    await vi.advanceTimersByTimeAsync(0);
    expect(seen).toEqual({ state: "rejected", reason });
  });
});
