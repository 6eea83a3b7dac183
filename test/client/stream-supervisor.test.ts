import { ReplaySubject, Subject, Subscriber } from "rxjs";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { HelloFrame } from "../../protocol/index.js";
import { SessionmuxError } from "../../protocol/index.js";
import type { ConnectionState } from "../../src/client/connection-state.js";
import { ConnectionRefusedError, RemoteStreamCarrierError } from "../../src/client/remote-errors.js";
import { streamRecovery } from "../../src/client/stream-recovery.js";
import { type SupervisorControl, superviseStream } from "../../src/client/stream-supervisor.js";

/**
 * The supervisor's rules, driven directly: each open is a Subject the test fails or completes,
 * the host generation and the `hello` feed are in the test's hands, timers are fake and the
 * backoff's jitter is pinned (random = 0.5), so every delay is exact.
 */
const policy = { baseMs: 1_000, capMs: 1_000_000 };

function hello(generation: string): HelloFrame {
  return { type: "hello", protocol: 1, hostId: "h", generation, serverTime: 0 };
}

function harness(options: { generation?: string | undefined; withInterruptedHook?: boolean } = {}) {
  const opens: Subject<string>[] = [];
  const state$ = new ReplaySubject<ConnectionState>(1);
  /** A socket opening with this `hello`. */
  const hello$ = {
    next: (h: HelloFrame) => state$.next({ name: "open", socketId: 1, hello: h }),
    complete: () => state$.complete(),
  };
  let generation: string | undefined = "generation" in options ? options.generation : "g1";
  const seen = {
    items: [] as string[],
    error: undefined as unknown,
    completed: false,
    interrupted: 0,
  };
  let control: SupervisorControl | undefined;
  const subscriber = new Subscriber<string>({
    next: (v) => seen.items.push(v),
    error: (e: unknown) => (seen.error = e),
    complete: () => (seen.completed = true),
  });
  const teardown = superviseStream<string, string>(
    subscriber,
    () => {
      const s = new Subject<string>();
      opens.push(s);
      return s;
    },
    {
      next: (item, c) => {
        control = c;
        seen.items.push(item);
      },
      ...(options.withInterruptedHook === false ? {} : { interrupted: () => void seen.interrupted++ }),
    },
    { policy, state$, generation: () => generation },
  );
  return {
    opens,
    hello$,
    state$,
    seen,
    teardown,
    control: () => {
      if (!control) throw new Error("no item delivered yet");
      return control;
    },
    setGeneration: (g: string | undefined) => {
      generation = g;
    },
    last: () => {
      const s = opens.at(-1);
      if (!s) throw new Error("never opened");
      return s;
    },
  };
}

const lost = () => new RemoteStreamCarrierError("socket_lost");
const retryable = () => new SessionmuxError("slow_consumer", "behind");

beforeEach(() => {
  vi.useFakeTimers();
  vi.spyOn(Math, "random").mockReturnValue(0.5);
});
afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

describe("stream supervisor", () => {
  it("opens at once, hands every item to the hook and ends when the host ends the stream", () => {
    const h = harness();
    expect(h.opens).toHaveLength(1);
    h.last().next("a");
    expect(h.seen.items).toEqual(["a"]);
    h.last().complete();
    expect(h.seen.completed).toBe(true);
    expect(h.opens).toHaveLength(1);
  });

  it("a lost socket reopens at once, without a backoff, and tells the hook", () => {
    const h = harness();
    h.last().error(lost());
    expect(h.seen.interrupted).toBe(1);
    expect(h.opens).toHaveLength(2);
    h.last().error(lost());
    expect(h.opens).toHaveLength(3);
    expect(h.seen.error).toBeUndefined();
    expect(h.seen.completed).toBe(false);
  });

  it("a carrier closed by the client completes the stream; a terminal error is its error", () => {
    const closed = harness();
    closed.last().error(new RemoteStreamCarrierError("client_closed"));
    expect(closed.seen.completed).toBe(true);
    expect(closed.seen.interrupted).toBe(0);
    expect(closed.opens).toHaveLength(1);

    const failed = harness();
    const terminal = new SessionmuxError("session_not_found", "gone");
    failed.last().error(terminal);
    expect(failed.seen.error).toBe(terminal);
    expect(failed.seen.completed).toBe(false);
    expect(failed.seen.interrupted).toBe(0);
    vi.advanceTimersByTime(10_000_000);
    expect(failed.opens).toHaveLength(1);
  });

  it("a retryable host error retries once per generation after the backoff, then waits for a new generation", () => {
    const h = harness();
    h.last().error(retryable());
    expect(h.seen.interrupted).toBe(1);
    expect(h.opens).toHaveLength(1);
    vi.advanceTimersByTime(499);
    expect(h.opens).toHaveLength(1);
    vi.advanceTimersByTime(1);
    expect(h.opens).toHaveLength(2);

    // the retry in g1 is spent: wait for a hello of another generation, not a timer
    h.last().error(retryable());
    expect(h.seen.interrupted).toBe(2);
    vi.advanceTimersByTime(10_000_000);
    expect(h.opens).toHaveLength(2);
    h.hello$.next(hello("g1"));
    expect(h.opens).toHaveLength(2);
    h.hello$.next(hello("g2"));
    expect(h.opens).toHaveLength(3);
    expect(h.seen.error).toBeUndefined();
  });

  it("without an open socket a retryable error reopens at once (the connection paces it)", () => {
    const h = harness({ generation: undefined });
    h.last().error(retryable());
    expect(h.opens).toHaveLength(2);
  });

  it("progress restores the generation's isolated retry and the backoff's first step", () => {
    const h = harness();
    h.last().error(retryable());
    vi.advanceTimersByTime(500);
    expect(h.opens).toHaveLength(2);
    h.last().next("x");
    h.control().progressed();
    h.last().error(retryable());
    // a second timer, at the first step again (500 ms), not a wait for the next generation
    vi.advanceTimersByTime(499);
    expect(h.opens).toHaveLength(2);
    vi.advanceTimersByTime(1);
    expect(h.opens).toHaveLength(3);
  });

  it("a client-side reopen drops the stream, tells the hook and reopens after a growing backoff", () => {
    const h = harness();
    h.last().next("x");
    const first = h.last();
    h.control().reopen();
    expect(first.observed).toBe(false);
    expect(h.seen.interrupted).toBe(1);
    vi.advanceTimersByTime(499);
    expect(h.opens).toHaveLength(1);
    vi.advanceTimersByTime(1);
    expect(h.opens).toHaveLength(2);

    h.last().next("y");
    h.control().reopen();
    vi.advanceTimersByTime(999);
    expect(h.opens).toHaveLength(2);
    vi.advanceTimersByTime(1);
    expect(h.opens).toHaveLength(3);

    h.last().next("z");
    h.control().progressed();
    h.control().reopen();
    vi.advanceTimersByTime(500);
    expect(h.opens).toHaveLength(4);
  });

  it("a refused connection waits for the next hello of any generation", () => {
    const h = harness();
    h.hello$.next(hello("g1"));
    h.last().error(new ConnectionRefusedError(401, "ws://127.0.0.1/x"));
    expect(h.seen.interrupted).toBe(1);
    // any hello counts, even the one replayed from before the refusal
    expect(h.opens).toHaveLength(2);

    const fresh = harness();
    fresh.last().error(new ConnectionRefusedError(401, "ws://127.0.0.1/x"));
    vi.advanceTimersByTime(10_000_000);
    expect(fresh.opens).toHaveLength(1);
    fresh.hello$.next(hello("g1"));
    expect(fresh.opens).toHaveLength(2);
  });

  it("a stream waiting for a hello opens again when the host turns out to speak another version, and fails with it", () => {
    const refused = harness();
    refused.last().error(new ConnectionRefusedError(401, "ws://127.0.0.1/x"));
    const spent = harness();
    spent.last().error(retryable());
    vi.advanceTimersByTime(500);
    spent.last().error(retryable());
    for (const h of [refused, spent]) {
      const opened = h.opens.length;
      h.state$.next({ name: "connecting", attempt: 0, socketId: 2 });
      expect(h.opens).toHaveLength(opened);
      h.state$.next({ name: "incompatible", protocol: 2 });
      // the client answers that open with the version's error (its connection is incompatible)
      expect(h.opens).toHaveLength(opened + 1);
      const error = new SessionmuxError("unsupported_protocol", "protocol 2");
      h.last().error(error);
      expect(h.seen.error).toBe(error);
    }
  });

  it("the client closing while the stream waits for a hello completes the stream", () => {
    const h = harness();
    h.last().error(retryable());
    vi.advanceTimersByTime(500);
    h.last().error(retryable());
    h.hello$.complete();
    expect(h.seen.completed).toBe(true);
    expect(h.opens).toHaveLength(2);
  });

  it("teardown stops a pending backoff, a wait for hello and the open stream", () => {
    const timed = harness();
    timed.last().error(retryable());
    expect(vi.getTimerCount()).toBe(1);
    timed.teardown();
    // no timer left behind to hold the process open for up to the backoff's cap
    expect(vi.getTimerCount()).toBe(0);
    vi.advanceTimersByTime(10_000_000);
    expect(timed.opens).toHaveLength(1);

    const waiting = harness();
    waiting.last().error(retryable());
    vi.advanceTimersByTime(500);
    waiting.last().error(retryable());
    waiting.teardown();
    waiting.hello$.next(hello("g2"));
    expect(waiting.opens).toHaveLength(2);

    const open = harness();
    open.teardown();
    expect(open.last().observed).toBe(false);
    expect(open.seen.completed).toBe(false);
  });

  it("the interrupted hook is optional", () => {
    const h = harness({ withInterruptedHook: false });
    h.last().error(lost());
    expect(h.opens).toHaveLength(2);
    h.last().next("x");
    h.control().reopen();
    vi.advanceTimersByTime(500);
    expect(h.opens).toHaveLength(3);
    expect(h.seen.error).toBeUndefined();
  });

  it("a consumer that unsubscribes from inside the item handler is not reopened by a later repair", () => {
    const h = harness();
    h.last().next("x");
    // the handler's consumer went away, then the handler asked for a repair
    h.teardown();
    h.control().reopen();
    vi.advanceTimersByTime(10_000_000);
    expect(h.opens).toHaveLength(1);
  });
});

describe("stream recovery", () => {
  it("names the recovery for each kind of failure, as callers of the exported rule read it", () => {
    expect(streamRecovery(lost())).toBe("reconnect");
    expect(streamRecovery(new RemoteStreamCarrierError("client_closed"))).toBe("complete");
    expect(streamRecovery(new ConnectionRefusedError(401, "ws://127.0.0.1/x"))).toBe("await-open");
    expect(streamRecovery(retryable())).toBe("retry");
    // retryable for a call, terminal for a stream
    expect(streamRecovery(new SessionmuxError("persistence_failure", "disk full"))).toBe("fail");
    expect(streamRecovery(new SessionmuxError("session_not_found", "gone"))).toBe("fail");
    expect(streamRecovery(new Error("not ours"))).toBe("fail");
  });
});
