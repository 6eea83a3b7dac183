import { Subject } from "rxjs";
import { describe, expect, it, vi } from "vitest";
import { type ControlMirror, EMPTY_MIRROR } from "../../src/client/control-mirror-reducer.js";
import { lastingMirror } from "../../web/src/console-link.js";
import { RETRY_CAP_MS, RETRY_FIRST_MS } from "../../web/src/retry-wait.js";
import { opensAfter, useRetryTimers } from "./retry-timers.js";

/**
 * The console's control mirror on fake timers: each mirror the test opens is a Subject it ends by
 * hand, so every wait before the next open is checked a millisecond before and at its end.
 */
function scripted(closed = () => false) {
  const opened: Subject<ControlMirror>[] = [];
  const errors: unknown[] = [];
  const seen: ControlMirror[] = [];
  let completed = false;
  const sub = lastingMirror(
    () => {
      const mirror = new Subject<ControlMirror>();
      opened.push(mirror);
      return mirror;
    },
    closed,
    (error) => errors.push(error),
  ).subscribe({ next: (m) => seen.push(m), complete: () => (completed = true) });
  return { opened, errors, seen, sub, completed: () => completed };
}

const live: ControlMirror = { ...EMPTY_MIRROR, stale: false, generation: "g1" };

useRetryTimers();

describe("the console's lasting control mirror", () => {
  it("opens a mirror that failed again, each wait twice the last up to its cap, and tells of each failure", async () => {
    const { opened, errors, sub } = scripted();
    let wait = RETRY_FIRST_MS;
    for (let failure = 1; failure <= 7; failure++) {
      opened.at(-1)!.error(new Error(`failure ${failure}`));
      expect(errors).toHaveLength(failure);
      await opensAfter(opened, wait);
      wait = Math.min(wait * 2, RETRY_CAP_MS);
    }
    expect(wait).toBe(RETRY_CAP_MS);
    sub.unsubscribe();
  });

  it("starts the waits over once a mirror is live again; a stale one does not count", async () => {
    const { opened, seen, sub } = scripted();
    opened[0]!.error(new Error("first"));
    await opensAfter(opened, RETRY_FIRST_MS);
    opened[1]!.next({ ...live, stale: true });
    opened[1]!.error(new Error("second"));
    await opensAfter(opened, RETRY_FIRST_MS * 2);
    opened[2]!.next(live);
    opened[2]!.error(new Error("third"));
    await opensAfter(opened, RETRY_FIRST_MS);
    expect(seen.map((m) => m.stale)).toEqual([true, false]);
    sub.unsubscribe();
  });

  it("opens a mirror the host ended again, and ends with the client once it is closed", async () => {
    let closed = false;
    const { opened, errors, sub, completed } = scripted(() => closed);
    opened[0]!.complete();
    await opensAfter(opened, RETRY_FIRST_MS);
    expect(completed()).toBe(false);
    closed = true;
    opened[1]!.complete();
    expect(completed()).toBe(true);
    await vi.advanceTimersByTimeAsync(RETRY_CAP_MS * 2);
    expect(opened).toHaveLength(2);
    expect(errors).toEqual([]);
    sub.unsubscribe();
  });

  it("ends, untold and never opened again, when a mirror fails once the client cannot connect again", async () => {
    let closed = false;
    const { opened, errors, sub, completed } = scripted(() => closed);
    opened[0]!.error(new Error("passing"));
    await opensAfter(opened, RETRY_FIRST_MS);
    // a host of another protocol version: every stream fails until a reload
    closed = true;
    opened[1]!.error(new Error("unsupported_protocol"));
    expect(completed()).toBe(true);
    await vi.advanceTimersByTimeAsync(RETRY_CAP_MS * 2);
    expect(opened).toHaveLength(2);
    expect(errors.map(String)).toEqual(["Error: passing"]);
    sub.unsubscribe();
  });

  it("an unsubscribe during a wait cancels the next open and leaves the open mirror", async () => {
    const { opened, sub } = scripted();
    opened[0]!.error(new Error("failed"));
    sub.unsubscribe();
    await vi.advanceTimersByTimeAsync(RETRY_CAP_MS * 2);
    expect(opened).toHaveLength(1);
    const again = scripted();
    again.sub.unsubscribe();
    expect(again.opened[0]!.observed).toBe(false);
  });
});
