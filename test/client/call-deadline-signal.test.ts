import { getEventListeners } from "node:events";
import { afterEach, describe, expect, it, vi } from "vitest";
import { SessionmuxError } from "../../protocol/index.js";
import { callDeadline } from "../../src/client/call-deadline.js";
import { LONGEST_TIMER_MS } from "../../src/operations/longest-timer.js";

describe("a call's deadline signal", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it("aborts with timeout when the time is up, describing the connection and the sent flag at that moment", () => {
    vi.useFakeTimers();
    let state = "connecting";
    let sent = false;
    const deadline = callDeadline(
      "session.list",
      100,
      undefined,
      () => state,
      () => sent,
    );
    vi.advanceTimersByTime(99);
    expect(deadline.signal.aborted).toBe(false);
    state = "the socket is open; the host did not answer";
    sent = true;
    vi.advanceTimersByTime(1);
    expect(deadline.signal.aborted).toBe(true);
    const reason = deadline.signal.reason as SessionmuxError;
    expect(reason).toBeInstanceOf(SessionmuxError);
    expect(reason.code).toBe("timeout");
    expect(reason.message).toBe(
      "session.list: no answer within 100 ms (the socket is open; the host did not answer)",
    );
    expect(reason.data).toStrictEqual({ method: "session.list", timeoutMs: 100, sent: true });
    deadline.dispose();
  });

  it("aborts with aborted when the caller's signal fires, with its reason and whether the call was sent", () => {
    const caller = new AbortController();
    let sent = false;
    const deadline = callDeadline(
      "session.prompt",
      Number.POSITIVE_INFINITY,
      caller.signal,
      () => "unused",
      () => sent,
    );
    sent = true;
    caller.abort("user left");
    const reason = deadline.signal.reason as SessionmuxError;
    expect(reason).toBeInstanceOf(SessionmuxError);
    expect(reason.code).toBe("aborted");
    expect(reason.message).toBe("session.prompt was aborted by the caller");
    expect(reason.cause).toBe("user left");
    expect(reason.data).toStrictEqual({ method: "session.prompt", sent: true });
    // the fired listener is gone from the caller's signal even before dispose
    expect(getEventListeners(caller.signal, "abort")).toHaveLength(0);
    deadline.dispose();
  });

  it("an already aborted caller's signal aborts the deadline at once, saying the call was not sent", () => {
    const deadline = callDeadline(
      "session.list",
      50,
      AbortSignal.abort("gone"),
      () => "unused",
      () => false,
    );
    expect(deadline.signal.reason).toMatchObject({ code: "aborted", cause: "gone", data: { sent: false } });
    deadline.dispose();
  });

  it("a timeout longer than the longest timer a runtime keeps is waited out in full, and dispose still clears it", () => {
    vi.useFakeTimers();
    const timeoutMs = LONGEST_TIMER_MS + 5_000;
    const deadline = callDeadline(
      "session.prompt",
      timeoutMs,
      undefined,
      () => "the socket is open; the host did not answer",
      () => true,
    );
    vi.advanceTimersByTime(1);
    expect(deadline.signal.aborted).toBe(false);
    vi.advanceTimersByTime(timeoutMs - 2);
    expect(deadline.signal.aborted).toBe(false);
    vi.advanceTimersByTime(1);
    expect(deadline.signal.reason).toMatchObject({ code: "timeout", data: { timeoutMs } });

    const disposed = callDeadline(
      "session.prompt",
      2 * LONGEST_TIMER_MS + 1,
      undefined,
      () => "",
      () => false,
    );
    vi.advanceTimersByTime(LONGEST_TIMER_MS + 1);
    expect(vi.getTimerCount()).toBe(1);
    disposed.dispose();
    expect(vi.getTimerCount()).toBe(0);
    vi.advanceTimersByTime(2 * LONGEST_TIMER_MS);
    expect(disposed.signal.aborted).toBe(false);
  });

  it("an infinite timeout sets no timer; dispose clears the timer and the caller's listener", () => {
    vi.useFakeTimers();
    const caller = new AbortController();
    const endless = callDeadline(
      "session.list",
      Number.POSITIVE_INFINITY,
      caller.signal,
      () => "",
      () => false,
    );
    expect(vi.getTimerCount()).toBe(0);
    endless.dispose();
    const timed = callDeadline(
      "session.list",
      100,
      caller.signal,
      () => "",
      () => false,
    );
    expect(vi.getTimerCount()).toBe(1);
    expect(getEventListeners(caller.signal, "abort")).toHaveLength(1);
    timed.dispose();
    expect(vi.getTimerCount()).toBe(0);
    expect(getEventListeners(caller.signal, "abort")).toHaveLength(0);
    vi.advanceTimersByTime(1_000);
    caller.abort();
    expect(timed.signal.aborted).toBe(false);
  });
});
