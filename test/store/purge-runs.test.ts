import { afterEach, describe, expect, it, vi } from "vitest";
import { PurgeRuns } from "../../src/store/purge-runs.js";

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

/**
 * A step the test answers: each call waits until `answer` (true: more may be left) or `fail`,
 * so a test says what happens between two steps.
 */
function scriptedStep() {
  const pending: { resolve(more: boolean): void; reject(err: unknown): void }[] = [];
  let calls = 0;
  const step = () =>
    new Promise<boolean>((resolve, reject) => {
      calls++;
      pending.push({ resolve, reject });
    });
  const next = async () => {
    await vi.waitFor(() => expect(pending.length).toBeGreaterThan(0));
    return pending.shift()!;
  };
  return {
    step,
    get calls() {
      return calls;
    },
    get waiting() {
      return pending.length;
    },
    answer: async (more: boolean) => (await next()).resolve(more),
    fail: async (err: unknown) => (await next()).reject(err),
  };
}

describe("PurgeRuns (docs/reliability.md: a purge finishes, resumes, and never runs twice at once)", () => {
  it("runs one step at a time while a step says more may be left, and ends at the first that says none", async () => {
    const script = scriptedStep();
    const runs = new PurgeRuns(script.step, () => undefined);
    expect(runs.running).toBe(false);
    runs.wake();
    expect(runs.running).toBe(true);
    // woken again while a step is under way: no second step starts beside it
    runs.wake();
    expect(script.calls).toBe(1);
    await script.answer(true);
    await script.answer(true);
    await vi.waitFor(() => expect(script.calls).toBe(3));
    await script.answer(false);
    // the wake given during the first step makes the run look once more before it ends
    await script.answer(false);
    await runs.settled();
    expect(runs.running).toBe(false);
    expect(script.calls).toBe(4);
    expect(script.waiting).toBe(0);
  });

  it("a wake while a run goes makes it look again, even after its steps said none was left", async () => {
    const script = scriptedStep();
    const runs = new PurgeRuns(script.step, () => undefined);
    runs.wake();
    await script.answer(false);
    await runs.settled();
    expect(script.calls).toBe(1);

    runs.wake();
    await vi.waitFor(() => expect(script.waiting).toBe(1));
    // a clear committed while this step ran: its purge may not have been seen by it
    runs.wake();
    await script.answer(false);
    await script.answer(false);
    await runs.settled();
    expect(script.calls).toBe(3);
  });

  it("settles at once when no run goes, and when the run ends otherwise", async () => {
    const script = scriptedStep();
    const runs = new PurgeRuns(script.step, () => undefined);
    let settled = false;
    await runs.settled();
    runs.wake();
    void runs.settled().then(() => {
      settled = true;
    });
    await script.answer(true);
    await vi.waitFor(() => expect(script.waiting).toBe(1));
    expect(settled).toBe(false);
    await script.answer(false);
    await vi.waitFor(() => expect(settled).toBe(true));
  });

  it("starts nothing once stopped; a step under way ends as it would, and none follows it", async () => {
    const script = scriptedStep();
    const errors: unknown[] = [];
    const runs = new PurgeRuns(script.step, (err) => errors.push(err));
    runs.wake();
    await vi.waitFor(() => expect(script.waiting).toBe(1));
    runs.stop();
    expect(runs.stopped).toBe(true);
    await script.answer(true);
    await runs.settled();
    expect(script.calls).toBe(1);
    runs.wake();
    expect(runs.running).toBe(false);
    await runs.settled();
    expect(script.calls).toBe(1);
    expect(errors).toEqual([]);
  });

  it("a failed step is reported and the run woken again a second later, by a timer that keeps no process alive", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    const timers: NodeJS.Timeout[] = [];
    const setTimer = globalThis.setTimeout;
    vi.spyOn(globalThis, "setTimeout").mockImplementation(((fn: () => void, ms: number) => {
      const timer = setTimer(fn, ms);
      timers.push(timer);
      return timer;
    }) as typeof setTimeout);
    const script = scriptedStep();
    const errors: unknown[] = [];
    const runs = new PurgeRuns(script.step, (err) => errors.push(err));
    runs.wake();
    const disk = Object.assign(new Error("disk full"), { code: "SQLITE_FULL" });
    await script.fail(disk);
    await runs.settled();
    expect(errors).toEqual([disk]);
    expect(runs.running).toBe(false);
    expect(timers.map((timer) => timer.hasRef())).toEqual([false]);
    await vi.advanceTimersByTimeAsync(999);
    expect(script.calls).toBe(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(script.calls).toBe(2);
    expect(runs.running).toBe(true);
    await script.answer(false);
    await runs.settled();
    expect(errors).toEqual([disk]);
  });

  it("after a stop, neither a failed step's error is reported nor a retry made; a stop clears a retry already set", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    const script = scriptedStep();
    const errors: unknown[] = [];
    const runs = new PurgeRuns(script.step, (err) => errors.push(err));
    runs.wake();
    await vi.waitFor(() => expect(script.waiting).toBe(1));
    runs.stop();
    await script.fail(new Error("the pool ended"));
    await runs.settled();
    expect(errors).toEqual([]);
    await vi.advanceTimersByTimeAsync(5_000);
    expect(script.calls).toBe(1);

    const again = scriptedStep();
    const retried = new PurgeRuns(again.step, (err) => errors.push(err));
    retried.wake();
    await again.fail(new Error("disk full"));
    await retried.settled();
    expect(errors).toHaveLength(1);
    retried.stop();
    await vi.advanceTimersByTimeAsync(5_000);
    expect(again.calls).toBe(1);
    expect(retried.running).toBe(false);
  });
});
