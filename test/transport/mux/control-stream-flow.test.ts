import { describe, expect, it } from "vitest";
import { SessionmuxError } from "../../../protocol/index.js";
import type { HostApi } from "../../../src/host/host-api.js";
import type { Baseline, ControlDelta } from "../../../src/host/live/live-state.js";
import { ADMIN } from "../../../src/host/principal.js";
import { BaselineGate } from "../../../src/transport/mux/baseline-gate.js";
import { ControlStream } from "../../../src/transport/mux/control-stream.js";
import { StreamOutlet } from "../../../src/transport/mux/stream-outlet.js";
import { RecordingWriter } from "./recording-writer.js";

/**
 * One `session.control` stream's ordering and flow control, driven step by step: the live state
 * feed and the baseline are in the test's hands, and the socket is a writer whose backlog the test
 * sets (each item sent adds its size, as an unread socket would). The socket-level behaviour is
 * proven against a real host in `control.test.ts`; this pins the queue, the high-water mark and
 * the bound exactly.
 */
const BASELINE: Baseline = {
  kind: "baseline",
  generation: "g",
  agents: [],
  queues: [],
  jobs: [],
  interactions: [],
  projections: [],
};

function delta(n: number): ControlDelta {
  return { kind: "agent", sessionId: `s${n}`, state: "idle" } as ControlDelta;
}

function harness(
  options: {
    highWaterBytes?: number;
    maxQueued?: number;
    maxQueuedBytes?: number;
    writer?: RecordingWriter;
    gate?: BaselineGate;
    baselineParts?: boolean;
    baseline?: Baseline;
  } = {},
) {
  const writer = options.writer ?? new RecordingWriter();
  const outlet = new StreamOutlet(7, writer.asFrameWriter(), () => undefined);
  const calls: string[] = [];
  let listener: ((delta: ControlDelta) => void) | undefined;
  let unsubscribed = 0;
  let settleBaseline: { resolve: (b: Baseline) => void; reject: (e: unknown) => void } | undefined;
  const logged: { err: unknown; context: string }[] = [];
  const host = {
    subscribeControl: (_principal: unknown, l: (delta: ControlDelta) => void) => {
      calls.push("subscribe");
      listener = l;
      return () => {
        unsubscribed++;
      };
    },
    controlBaseline: () => {
      calls.push("baseline");
      return new Promise<Baseline>((resolve, reject) => {
        settleBaseline = { resolve, reject };
      });
    },
  } as unknown as HostApi;
  const stream = new ControlStream({
    host,
    principal: ADMIN,
    outlet,
    highWaterBytes: options.highWaterBytes ?? 100,
    maxQueued: options.maxQueued ?? 1_000,
    maxQueuedBytes: options.maxQueuedBytes ?? 16 * 1024 * 1024,
    baselines: options.gate ?? new BaselineGate(writer.asFrameWriter(), options.highWaterBytes ?? 100),
    logInternal: (err, context) => logged.push({ err, context }),
    baselineParts: options.baselineParts ?? false,
  });
  const started = stream.start();
  return {
    writer,
    stream,
    calls,
    logged,
    started,
    unsubscribed: () => unsubscribed,
    emit: (d: ControlDelta) => {
      if (!listener) throw new Error("not subscribed");
      listener(d);
    },
    async baseline(): Promise<void> {
      settleBaseline?.resolve(options.baseline ?? BASELINE);
      await started;
    },
    async failBaseline(err: unknown): Promise<void> {
      settleBaseline?.reject(err);
      await started;
    },
  };
}

const kinds = (values: unknown[]) =>
  values.map((v) => {
    const item = v as { kind: string; sessionId?: string };
    return item.kind === "baseline" ? "baseline" : item.sessionId;
  });

describe("control stream: order and flow control", () => {
  it("listens before it asks for the baseline; deltas of the build follow the baseline, then live ones", async () => {
    const h = harness();
    expect(h.calls).toEqual(["subscribe", "baseline"]);
    h.emit(delta(1));
    h.emit(delta(2));
    expect(h.writer.values).toEqual([]);
    await h.baseline();
    expect(kinds(h.writer.values)).toEqual(["baseline", "s1", "s2"]);
    h.emit(delta(3));
    h.emit(delta(4));
    expect(kinds(h.writer.values)).toEqual(["baseline", "s1", "s2", "s3", "s4"]);
    expect(h.writer.values[1]).toEqual(delta(1));
    expect(h.writer.drainRequests).toBe(0);
  });

  it("a baseline asked for in parts: every part, the last without `more`, before the deltas of the build", async () => {
    const projections = Array.from({ length: 600 }, (_, i) => ({
      sessionId: `p${i}`,
      title: "t".repeat(200),
    }));
    const baseline = { ...BASELINE, projections } as unknown as Baseline;
    const h = harness({ baselineParts: true, baseline, highWaterBytes: 1 << 30 });
    h.emit(delta(1));
    await h.baseline();
    h.emit(delta(2));
    const values = h.writer.values as (Baseline & { more?: true })[];
    const parts = values.filter((v) => v.kind === "baseline");
    expect(parts.length).toBeGreaterThan(1);
    expect(values.slice(0, parts.length)).toEqual(parts);
    expect(parts.map((p) => p.more)).toEqual([...parts.slice(1).map(() => true), undefined]);
    expect(parts.flatMap((p) => p.projections)).toEqual(projections);
    expect(kinds(values.slice(parts.length))).toEqual(["s1", "s2"]);
    // without `baselineParts`, the same baseline is one item
    const whole = harness({ baseline, highWaterBytes: 1 << 30 });
    await whole.baseline();
    expect(whole.writer.values).toEqual([baseline]);
  });

  it("holds deltas above the high-water mark, in order, and sends them when the socket drains", async () => {
    const h = harness({ highWaterBytes: 100 });
    await h.baseline();
    h.writer.buffered = 100; // at the mark: still sent
    h.emit(delta(1));
    expect(kinds(h.writer.values)).toEqual(["baseline", "s1"]);
    h.writer.buffered = 101;
    h.emit(delta(2));
    h.emit(delta(3));
    expect(kinds(h.writer.values)).toEqual(["baseline", "s1"]);
    expect(h.writer.waiters.size).toBe(1);
    h.writer.drain();
    expect(kinds(h.writer.values)).toEqual(["baseline", "s1", "s2", "s3"]);
    expect(h.writer.waiters.size).toBe(0);
  });

  it("a delta behind held ones waits with them for the drain, even when the backlog already fell", async () => {
    const h = harness({ highWaterBytes: 100 });
    await h.baseline();
    h.writer.buffered = 101;
    h.emit(delta(1));
    h.writer.buffered = 0; // the kernel took the bytes; 'drain' has not fired yet
    h.emit(delta(2));
    expect(kinds(h.writer.values)).toEqual(["baseline"]);
    expect(h.writer.drainRequests).toBe(1);
    h.writer.drain();
    expect(kinds(h.writer.values)).toEqual(["baseline", "s1", "s2"]);
  });

  it("a flush that fills the socket again sends only what fits and waits for the next drain", async () => {
    const h = harness({ highWaterBytes: 100 });
    h.writer.growth = 60;
    for (let n = 1; n <= 5; n++) h.emit(delta(n));
    await h.baseline();
    // the baseline (60) and s1 (120 after it) go; then the backlog is over the mark
    expect(kinds(h.writer.values)).toEqual(["baseline", "s1"]);
    expect(h.writer.waiters.size).toBe(1);
    h.writer.drain();
    expect(kinds(h.writer.values)).toEqual(["baseline", "s1", "s2", "s3"]);
    h.emit(delta(6));
    expect(kinds(h.writer.values)).toEqual(["baseline", "s1", "s2", "s3"]);
    h.writer.drain();
    expect(kinds(h.writer.values)).toEqual(["baseline", "s1", "s2", "s3", "s4", "s5"]);
    h.writer.drain();
    expect(kinds(h.writer.values)).toEqual(["baseline", "s1", "s2", "s3", "s4", "s5", "s6"]);
    expect(h.writer.waiters.size).toBe(0);
    expect(h.writer.errors).toEqual([]);
  });

  it("a reader holding more than maxQueued deltas is ended with slow_consumer and let go", async () => {
    const h = harness({ maxQueued: 3 });
    await h.baseline();
    h.writer.buffered = 1_000;
    for (let n = 1; n <= 3; n++) h.emit(delta(n));
    expect(h.writer.errors).toEqual([]);
    h.emit(delta(4));
    expect(h.writer.errors).toEqual([
      expect.objectContaining({
        code: "slow_consumer",
        retryable: true,
        data: { queued: 4, queuedBytes: 4 * JSON.stringify(delta(1)).length },
      }),
    ]);
    expect(h.unsubscribed()).toBe(1);
    expect(h.writer.waiters.size).toBe(0);
    // nothing more, even when the socket drains or the feed goes on
    h.emit(delta(5));
    h.writer.drain();
    expect(kinds(h.writer.values)).toEqual(["baseline"]);
    expect(h.writer.errors).toHaveLength(1);
    expect(h.logged).toEqual([]);
  });

  it("a reader whose held deltas weigh more than maxQueuedBytes is ended with slow_consumer, though they are fewer than maxQueued", async () => {
    // a queue snapshot weighs its prompts' texts: 64 + 64 + 3,000 + the item id's 2
    const queued = (n: number): ControlDelta => ({
      kind: "queue",
      sessionId: `s${n}`,
      items: [{ itemId: `i${n}`, text: String(n % 10).repeat(3_000), queuedAt: 0 }],
    });
    const h = harness({ maxQueued: 1_000, maxQueuedBytes: 3 * 3_130 });
    await h.baseline();
    h.writer.buffered = 1_000;
    for (let n = 1; n <= 3; n++) h.emit(queued(n));
    expect(h.writer.errors).toEqual([]);
    // sent deltas weigh nothing any more: the next three fit again
    h.writer.drain();
    expect(kinds(h.writer.values)).toEqual(["baseline", "s1", "s2", "s3"]);
    h.writer.buffered = 1_000;
    for (let n = 4; n <= 6; n++) h.emit(queued(n));
    expect(h.writer.errors).toEqual([]);
    h.emit(queued(7));
    expect(h.writer.errors).toEqual([
      expect.objectContaining({
        code: "slow_consumer",
        retryable: true,
        data: { queued: 4, queuedBytes: 4 * 3_130 },
      }),
    ]);
    expect(h.unsubscribed()).toBe(1);
    h.writer.drain();
    expect(kinds(h.writer.values)).toEqual(["baseline", "s1", "s2", "s3"]);
  });

  it("a socket builds its baselines one at a time, each once the backlog is at most the high-water mark", async () => {
    const writer = new RecordingWriter();
    const gate = new BaselineGate(writer.asFrameWriter(), 100);
    writer.growth = 150;
    const first = harness({ writer, gate });
    const second = harness({ writer, gate });
    const closed = harness({ writer, gate });
    closed.stream.stop();
    expect(first.calls).toEqual(["subscribe", "baseline"]);
    expect(second.calls).toEqual([]);
    await first.baseline();
    // the first baseline is sent and over the mark: the second waits for the drain
    expect(second.calls).toEqual([]);
    expect(writer.waiters.size).toBe(1);
    writer.drain();
    expect(second.calls).toEqual(["subscribe", "baseline"]);
    await second.baseline();
    writer.drain();
    // a stream closed while it waited never listens nor asks
    await closed.started;
    expect(closed.calls).toEqual([]);
    expect(kinds(writer.values)).toEqual(["baseline", "baseline"]);
  });

  it("a backlog exactly at the high-water mark lets the next baseline build at once", async () => {
    const writer = new RecordingWriter();
    const gate = new BaselineGate(writer.asFrameWriter(), 100);
    writer.growth = 100;
    const first = harness({ writer, gate });
    const second = harness({ writer, gate });
    await first.baseline();
    expect(writer.buffered).toBe(100);
    expect(second.calls).toEqual(["subscribe", "baseline"]);
    expect(writer.drainRequests).toBe(0);
  });

  it("a baseline asked for while others wait for the drain goes behind them, though the backlog fell below the mark first", async () => {
    const writer = new RecordingWriter();
    const gate = new BaselineGate(writer.asFrameWriter(), 100);
    writer.growth = 150;
    const first = harness({ writer, gate });
    const second = harness({ writer, gate });
    await first.baseline();
    expect(writer.waiters.size).toBe(1);
    // the peer read part of the backlog: under the mark, but the drain has not come yet
    writer.buffered = 50;
    const third = harness({ writer, gate });
    // the one waiting longest builds now; the new one waits its turn
    expect(second.calls).toEqual(["subscribe", "baseline"]);
    expect(third.calls).toEqual([]);
    await second.baseline();
    expect(third.calls).toEqual([]);
    writer.drain();
    expect(third.calls).toEqual(["subscribe", "baseline"]);
    await third.baseline();
    expect(kinds(writer.values)).toEqual(["baseline", "baseline", "baseline"]);
  });

  it("a socket gone while baselines wait behind its backlog asks for no drain: they never build", async () => {
    const writer = new RecordingWriter();
    const gate = new BaselineGate(writer.asFrameWriter(), 100);
    writer.growth = 150;
    const first = harness({ writer, gate });
    const second = harness({ writer, gate });
    writer.open = false;
    await first.baseline();
    expect(writer.drainRequests).toBe(0);
    expect(writer.waiters.size).toBe(0);
    expect(second.calls).toEqual([]);
  });

  it("counts the deltas of the build against the bound too", async () => {
    const h = harness({ maxQueued: 2 });
    h.emit(delta(1));
    h.emit(delta(2));
    h.emit(delta(3));
    expect(h.writer.errors.map((e) => e.code)).toEqual(["slow_consumer"]);
    await h.baseline();
    expect(h.writer.values).toEqual([]);
  });

  it("a baseline that fails ends the stream with its code; an unexpected failure is logged as internal", async () => {
    const typed = harness();
    await typed.failBaseline(new SessionmuxError("persistence_failure", "disk"));
    expect(typed.writer.errors.map((e) => e.code)).toEqual(["persistence_failure"]);
    expect(typed.logged).toEqual([]);
    expect(typed.unsubscribed()).toBe(1);

    const broken = harness();
    const bug = new Error("bug");
    await broken.failBaseline(bug);
    expect(broken.writer.errors.map((e) => e.code)).toEqual(["internal_error"]);
    expect(broken.logged).toEqual([{ err: bug, context: "session.control" }]);
    expect(broken.unsubscribed()).toBe(1);
  });

  it("closed while the baseline is built: nothing is sent, the listener is gone, a late failure is not logged", async () => {
    const h = harness();
    h.emit(delta(1));
    h.stream.stop();
    expect(h.unsubscribed()).toBe(1);
    h.emit(delta(2));
    await h.baseline();
    expect(h.writer.values).toEqual([]);

    const failing = harness();
    failing.stream.stop();
    await failing.failBaseline(new Error("late"));
    expect(failing.logged).toEqual([]);
    expect(failing.writer.errors).toEqual([]);
  });

  it("closed while waiting for a drain: the drain waiter is cancelled, the listener released once", async () => {
    const h = harness();
    await h.baseline();
    h.writer.buffered = 1_000;
    h.emit(delta(1));
    expect(h.writer.waiters.size).toBe(1);
    h.stream.stop();
    h.stream.stop();
    expect(h.writer.waiters.size).toBe(0);
    expect(h.unsubscribed()).toBe(1);
    h.writer.buffered = 0;
    h.emit(delta(2));
    expect(kinds(h.writer.values)).toEqual(["baseline"]);
  });
});
