import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { type SessionEvent, SessionmuxError } from "../../../protocol/index.js";
import { ADMIN } from "../../../src/host/principal.js";
import type { SessionReadHandle } from "../../../src/host/session-read-handle.js";
import { HostMetrics } from "../../../src/transport/metrics.js";
import { FollowStream } from "../../../src/transport/mux/follow-stream.js";
import { LogReadGate } from "../../../src/transport/mux/log-read-gate.js";
import { StreamOutlet } from "../../../src/transport/mux/stream-outlet.js";
import { RecordingWriter } from "./recording-writer.js";
import { ScriptedLog } from "./scripted-log.js";

/**
 * One `session.follow` stream against a log whose reads and commit notices arrive when the test
 * says (`ScriptedLog`), and a socket whose backlog the test sets (`RecordingWriter`): each path
 * of the stream (replay pages, commits buffered during a read, overlap, gap, overflow, clear,
 * pause at the high-water mark, catch-up) is taken on purpose, and what the host sent is checked
 * to be exactly afterSeq+1 … head, once each, in order. `follow-interleaving.test.ts` takes the
 * same paths at random against the real store behind the asynchronous double.
 */
type Item = { kind: string; epoch?: string; headSeq?: number; seq?: number; events?: SessionEvent[] };

function harness(
  log: ScriptedLog,
  options: {
    afterSeq?: number;
    epoch?: string;
    replayBatch?: number;
    highWaterBytes?: number;
    readRetryMs?: number;
    openRead?: () => Promise<SessionReadHandle>;
    /** A host without metrics: every path must run without them. */
    withoutMetrics?: boolean;
  } = {},
) {
  const writer = new RecordingWriter();
  const outlet = new StreamOutlet(3, writer.asFrameWriter(), () => undefined);
  const highWaterBytes = options.highWaterBytes ?? 1_000;
  const logReads = new LogReadGate(writer.asFrameWriter(), highWaterBytes, 8);
  const metrics = new HostMetrics();
  const logged: { err: unknown; context: string }[] = [];
  const params: { sessionId: string; afterSeq?: number; epoch?: string } = { sessionId: log.sessionId };
  if (options.afterSeq !== undefined) params.afterSeq = options.afterSeq;
  if (options.epoch !== undefined) params.epoch = options.epoch;
  const stream = new FollowStream(
    {
      host: log.host(options.openRead),
      principal: ADMIN,
      outlet,
      replayBatch: options.replayBatch ?? 2,
      highWaterBytes,
      readRetryMs: options.readRetryMs ?? 60_000,
      metrics: options.withoutMetrics ? undefined : metrics,
      logInternal: (err, context) => logged.push({ err, context }),
      logReads,
    },
    params,
  );
  const started = stream.start();
  const items = () => writer.values as Item[];
  return {
    writer,
    stream,
    started,
    metrics,
    logged,
    items,
    /** Seqs of every event sent, in order. */
    seqs: () => items().flatMap((i) => (i.kind === "events" ? (i.events ?? []).map((e) => e.seq) : [])),
    kinds: () => items().map((i) => i.kind),
    async paths(): Promise<Record<string, number>> {
      const values = (await metrics.followContinuations.get()).values;
      return Object.fromEntries(values.map((v) => [String(v.labels.path), v.value]));
    },
    async slow(): Promise<number> {
      return (await metrics.slowFollowers.get()).values[0]?.value ?? 0;
    },
    async lag(): Promise<{ count: number; sum: number }> {
      const values = (await metrics.followerLag.get()).values;
      const find = (name: string) => values.find((v) => v.metricName === name)?.value ?? 0;
      return {
        count: find("sessionmux_follower_lag_events_count"),
        sum: find("sessionmux_follower_lag_events_sum"),
      };
    },
  };
}

/** Lets every ready promise and `setImmediate` run (the stream has no other asynchrony here). */
async function idle(): Promise<void> {
  for (let i = 0; i < 30; i++) await new Promise((resolve) => setImmediate(resolve));
}

const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

/**
 * A follower of a new log holding `committed` events, once it settled; with `held` the log's
 * reads wait for `nextRead()` to be released, the first one under way.
 */
async function follower(committed: number, options: Parameters<typeof harness>[1] & { held?: boolean } = {}) {
  const { held, ...rest } = options;
  const log = new ScriptedLog();
  if (held) log.autoRelease = false;
  log.commit(committed);
  const h = harness(log, rest);
  await idle();
  return { log, h };
}

describe("follow stream: replay", () => {
  it("replays afterSeq+1 … head in pages that grow while events are small, then caughtUp once, then live batches", async () => {
    const { log, h } = await follower(7, { afterSeq: 2 });
    expect(h.items()[0]).toEqual({ kind: "opened", epoch: "E1", headSeq: 7 });
    expect(h.seqs()).toEqual(range(3, 7));
    expect(h.items().at(-1)).toEqual({ kind: "caughtUp", seq: 7 });
    // one item per replayBatch events; the first read is one item, the next up to 8 items
    expect(log.reads).toEqual([
      { afterSeq: 2, limit: 2, perArray: 2 },
      { afterSeq: 4, limit: 16, perArray: 2 },
    ]);
    expect(h.kinds()).toEqual(["opened", "events", "events", "events", "caughtUp"]);
    expect(h.stream.state).toBe("live");

    log.append(2);
    log.append(1);
    expect(h.seqs()).toEqual(range(3, 10));
    expect(h.kinds().filter((k) => k === "caughtUp")).toHaveLength(1);
    expect(log.reads).toHaveLength(2);
    expect(await h.lag()).toEqual({ count: 0, sum: 0 });
  });

  it("a page exactly as long as the read is followed by another read", async () => {
    const { log, h } = await follower(2 + 16);
    expect(h.seqs()).toEqual(range(1, 18));
    expect(log.reads.map((r) => r.afterSeq)).toEqual([0, 2, 18]);
    expect(h.items().at(-1)).toEqual({ kind: "caughtUp", seq: 18 });
  });

  it("large events keep each read within the byte budget", async () => {
    const log = new ScriptedLog();
    log.textBytes = 100_000;
    log.commit(20);
    const h = harness(log);
    await idle();
    expect(h.seqs()).toEqual(range(1, 20));
    // ~200 kB per item of 2: five items fit the 1 MiB budget
    expect(log.reads.map((r) => r.limit)).toEqual([2, 10, 10]);

    const huge = new ScriptedLog();
    huge.textBytes = 600_000;
    huge.commit(5);
    const g = harness(huge);
    await idle();
    expect(g.seqs()).toEqual(range(1, 5));
    expect(huge.reads.map((r) => r.limit)).toEqual([2, 2, 2]);
  });

  it("follows from the start without a cursor, and from the head with nothing to replay", async () => {
    const log = new ScriptedLog();
    log.commit(3);
    const fromStart = harness(log);
    const atHead = harness(log, { afterSeq: 3, epoch: "E1" });
    await idle();
    expect(fromStart.seqs()).toEqual([1, 2, 3]);
    expect(atHead.items()).toEqual([
      { kind: "opened", epoch: "E1", headSeq: 3 },
      { kind: "caughtUp", seq: 3 },
    ]);
    log.append(1);
    expect(atHead.seqs()).toEqual([4]);
  });

  it("a cursor past the head is refused with cursor_ahead, and the stream lets go", async () => {
    const { log, h } = await follower(3, { afterSeq: 4, epoch: "E1" });
    expect(h.kinds()).toEqual(["opened"]);
    expect(h.writer.errors).toEqual([
      expect.objectContaining({ code: "cursor_ahead", data: { afterSeq: 4, headSeq: 3, epoch: "E1" } }),
    ]);
    expect(log.listeners.size).toBe(0);
    expect(log.reads).toEqual([]);
    expect(h.logged).toEqual([]);
  });

  it("a cursor of another epoch gets reset and the whole log, whatever its seq", async () => {
    const { h } = await follower(3, { afterSeq: 9, epoch: "old" });
    expect(h.items().slice(0, 2)).toEqual([
      { kind: "opened", epoch: "E1", headSeq: 3 },
      { kind: "reset", epoch: "E1" },
    ]);
    expect(h.seqs()).toEqual([1, 2, 3]);
    expect(h.writer.errors).toEqual([]);
  });
});

describe("follow stream: commits during a log read", () => {
  it("listens before the first read: a commit made while it runs is sent once, after it (buffered)", async () => {
    const { log, h } = await follower(3, { held: true, replayBatch: 4 });
    expect(log.listeners.size).toBe(1);
    log.nextRead().release(); // its snapshot ends at 3
    log.append(2);
    log.autoRelease = true;
    await idle();
    expect(h.seqs()).toEqual(range(1, 5));
    expect(h.items().at(-1)).toEqual({ kind: "caughtUp", seq: 5 });
    expect(log.reads).toHaveLength(1);
    expect(await h.paths()).toEqual({ buffered: 1 });
  });

  it("a commit the read already holds is not sent again (overlap)", async () => {
    const { log, h } = await follower(1, { held: true, replayBatch: 4 });
    log.append(2);
    log.nextRead().release(); // its snapshot holds 2 and 3
    await idle();
    expect(h.seqs()).toEqual(range(1, 3));
    expect(log.reads).toHaveLength(1);
    expect(await h.paths()).toEqual({ overlap: 1 });
  });

  it("buffered commits that do not continue the read are not sent: the log is read again (gap)", async () => {
    const { log, h } = await follower(3, { held: true, replayBatch: 4 });
    log.nextRead().release(); // snapshot 1..3
    log.commit(1); // 4: its notice is late
    log.append(2); // 5, 6
    log.autoRelease = true;
    await idle();
    expect(h.seqs()).toEqual(range(1, 6));
    expect(log.reads.map((r) => r.afterSeq)).toEqual([0, 3]);
    expect(await h.paths()).toEqual({ gap: 1 });
    expect(h.items().filter((i) => i.kind === "caughtUp")).toEqual([{ kind: "caughtUp", seq: 6 }]);
  });

  it("more buffered events than four items' worth are dropped and read from the log instead", async () => {
    const { log, h } = await follower(1, { held: true });
    log.nextRead().release();
    log.append(4);
    log.append(4); // 8 events buffered: the bound (4 items of 2), still kept
    log.autoRelease = true;
    await idle();
    expect(h.seqs()).toEqual(range(1, 9));
    expect(log.reads).toHaveLength(1);
    expect(await h.paths()).toEqual({ buffered: 2 });

    const over = new ScriptedLog();
    over.autoRelease = false;
    over.commit(1);
    const g = harness(over);
    await idle();
    over.nextRead().release();
    over.append(4);
    over.append(4);
    over.append(1); // 9: over the bound
    over.notify({ kind: "meta" });
    over.append(1);
    over.autoRelease = true;
    await idle();
    expect(g.seqs()).toEqual(range(1, 11));
    expect(over.reads.map((r) => r.afterSeq)).toEqual([0, 1]);
    expect(await g.paths()).toEqual({ gap: 1 });
  });

  it("a clear and a meta counted in the buffer each weigh one event", async () => {
    const { log, h } = await follower(1, { held: true });
    log.nextRead().release();
    log.append(4);
    log.append(3);
    log.notify({ kind: "meta" }); // 8
    log.notify({ kind: "meta" }); // 9: over the bound
    log.autoRelease = true;
    await idle();
    expect(h.seqs()).toEqual(range(1, 8));
    expect(log.reads).toHaveLength(2);
    expect(await h.paths()).toEqual({ gap: 1 });
  });

  it("a meta notice in the buffer changes nothing", async () => {
    const { log, h } = await follower(2, { held: true, replayBatch: 4 });
    log.nextRead().release();
    log.notify({ kind: "meta" });
    log.append(1);
    log.autoRelease = true;
    await idle();
    expect(h.seqs()).toEqual([1, 2, 3]);
    expect(log.reads).toHaveLength(1);
    expect(await h.paths()).toEqual({ buffered: 1 });
  });

  it("a clear after the read's snapshot: the log is read again and the new epoch starts with reset", async () => {
    const { log, h } = await follower(3, { held: true, replayBatch: 4 });
    log.nextRead().release(); // E1, 1..3
    log.clear("E2");
    log.notify({ kind: "clear", epoch: "E2" });
    log.append(2);
    log.autoRelease = true;
    await idle();
    expect(h.kinds()).toEqual(["opened", "events", "reset", "events", "caughtUp"]);
    expect(h.items()[2]).toEqual({ kind: "reset", epoch: "E2" });
    expect(h.seqs()).toEqual([1, 2, 3, 1, 2]);
    expect(log.reads.map((r) => r.afterSeq)).toEqual([0, 3, 0]);
    // a clear is not a gap of the buffer
    expect(await h.paths()).toEqual({});
  });

  it("a clear the read already saw is skipped, and its epoch's commits overlap the read", async () => {
    const { log, h } = await follower(3, { held: true, replayBatch: 4 });
    log.clear("E2");
    log.commit(2);
    log.nextRead().release(); // already E2: reset, then read E2 from 0
    await idle();
    log.notify({ kind: "clear", epoch: "E2" });
    log.notify({ kind: "append", epoch: "E2", events: log.events.slice(0, 2) });
    log.nextRead().release();
    log.autoRelease = true;
    await idle();
    expect(h.kinds()).toEqual(["opened", "reset", "events", "caughtUp"]);
    expect(h.seqs()).toEqual([1, 2]);
    expect(log.reads).toHaveLength(2);
    expect(await h.paths()).toEqual({ overlap: 1 });
  });

  it("a commit of another epoch in the buffer sends the follower back to the log", async () => {
    const { log, h } = await follower(2, { held: true, replayBatch: 4 });
    log.nextRead().release();
    log.notify({ kind: "append", epoch: "other", events: [{ ...log.events[0]!, seq: 3 }] });
    log.autoRelease = true;
    await idle();
    expect(h.seqs()).toEqual([1, 2]);
    expect(log.reads).toHaveLength(2);
    expect(await h.paths()).toEqual({ gap: 1 });
  });
});

describe("follow stream: live", () => {
  it("a committed batch is encoded once for every follower", async () => {
    const log = new ScriptedLog();
    const a = harness(log);
    const b = harness(log);
    await idle();
    log.append(2);
    expect(a.writer.bodies.at(-1)).toBe(b.writer.bodies.at(-1));
    expect(a.seqs()).toEqual([1, 2]);
  });

  it("a late notice overlapping what was sent sends only its new events; one wholly sent, nothing", async () => {
    const { log, h } = await follower(5);
    const reads = log.reads.length;
    const batch = log.commit(2); // 6, 7
    log.notify({ kind: "append", epoch: "E1", events: [...log.events.slice(3, 5), ...batch] });
    expect(h.seqs()).toEqual(range(1, 7));
    expect(h.items().at(-1)).toEqual({ kind: "events", events: batch });
    log.notify({ kind: "append", epoch: "E1", events: batch });
    log.notify({ kind: "append", epoch: "E1", events: [] });
    expect(h.seqs()).toEqual(range(1, 7));
    expect(log.reads).toHaveLength(reads);
    // a batch starting at the last sent seq: only what follows it
    const next = log.commit(2); // 8, 9
    log.notify({ kind: "append", epoch: "E1", events: [log.events[6]!, ...next] });
    expect(h.seqs()).toEqual(range(1, 9));
    expect(log.reads).toHaveLength(reads);
    expect(h.writer.errors).toEqual([]);
  });

  it("a live gap is served from the log, once, without a second caughtUp", async () => {
    const { log, h } = await follower(6);
    log.commit(1); // 7: its notice never comes
    log.append(1); // 8
    await idle();
    expect(h.seqs()).toEqual(range(1, 8));
    expect(h.kinds().filter((k) => k === "caughtUp")).toHaveLength(1);
    expect(log.reads.at(-1)?.afterSeq).toBe(6);
    expect(h.stream.state).toBe("live");
    // the lag of a follower served from the log: 8 - 6
    expect(await h.lag()).toEqual({ count: 1, sum: 2 });
  });

  it("a clear or a commit of another epoch sends the follower back to the log, whose replay ends in caughtUp again; a meta does not", async () => {
    const { log, h } = await follower(2);
    const reads = log.reads.length;
    log.notify({ kind: "meta" });
    await idle();
    expect(log.reads).toHaveLength(reads);
    log.clear("E2");
    log.notify({ kind: "clear", epoch: "E2" });
    await idle();
    // each new epoch's replay ends with its own caughtUp: the reader that reset knows it is live
    expect(h.items().slice(-2)).toEqual([
      { kind: "reset", epoch: "E2" },
      { kind: "caughtUp", seq: 0 },
    ]);
    log.clear("E3");
    log.commit(1);
    log.notify({ kind: "append", epoch: "E3", events: log.events });
    await idle();
    expect(h.items().slice(-3)).toEqual([
      { kind: "reset", epoch: "E3" },
      { kind: "events", events: log.events },
      { kind: "caughtUp", seq: 1 },
    ]);
    // each: one read finds the new epoch (reset), one reads it from its start
    expect(log.reads).toHaveLength(reads + 4);
  });

  it("pauses above the high-water mark, drops notices, and catches up from the log when the socket drains", async () => {
    const { log, h } = await follower(2, { highWaterBytes: 100 });
    h.writer.buffered = 100; // at the mark: still pushed
    log.append(1);
    expect(h.seqs()).toEqual([1, 2, 3]);
    h.writer.buffered = 101;
    log.append(2);
    log.append(1);
    expect(h.seqs()).toEqual([1, 2, 3]);
    expect(h.stream.state).toBe("paused");
    expect(await h.slow()).toBe(1);
    expect(h.writer.waiters.size).toBe(1);
    // the backlog fell, but 'drain' has not fired: still paused, the log serves it after
    h.writer.buffered = 0;
    log.append(1);
    expect(h.seqs()).toEqual([1, 2, 3]);
    h.writer.drain();
    await idle();
    expect(h.seqs()).toEqual(range(1, 7));
    expect(h.stream.state).toBe("live");
    expect(await h.slow()).toBe(0);
    expect(h.kinds().filter((k) => k === "caughtUp")).toHaveLength(1);
    expect(await h.lag()).toEqual({ count: 1, sum: 4 });
  });

  it("a replay that fills the socket pauses before its next read and resumes where it stopped", async () => {
    const log = new ScriptedLog();
    log.commit(6);
    const h = harness(log, { highWaterBytes: 100 });
    h.writer.growth = 60;
    await idle();
    // opened (60), one page (120): over the mark before the second read
    expect(h.seqs()).toEqual([1, 2]);
    expect(h.stream.state).toBe("paused");
    expect(log.reads).toHaveLength(1);
    h.writer.growth = 0;
    h.writer.drain();
    await idle();
    expect(h.seqs()).toEqual(range(1, 6));
    expect(h.items().at(-1)).toEqual({ kind: "caughtUp", seq: 6 });
  });

  it("a follower paused between two reads takes no live commit before the drain", async () => {
    const log = new ScriptedLog();
    log.commit(2);
    const h = harness(log, { highWaterBytes: 100 });
    h.writer.growth = 60;
    await idle();
    expect(h.stream.state).toBe("paused");
    expect(h.seqs()).toEqual([1, 2]);
    h.writer.growth = 0;
    h.writer.buffered = 0; // the backlog fell; 'drain' has not fired yet
    log.append(1);
    expect(h.seqs()).toEqual([1, 2]);
    h.writer.drain();
    await idle();
    expect(h.seqs()).toEqual([1, 2, 3]);
    expect(h.items().at(-1)).toEqual({ kind: "caughtUp", seq: 3 });
  });

  it("a catch-up that fills the socket pauses before its next read and resumes where it stopped", async () => {
    const { log, h } = await follower(1, { highWaterBytes: 100 });
    h.writer.buffered = 101;
    log.append(1); // pauses
    log.commit(40);
    h.writer.growth = 60;
    h.writer.drain();
    await idle();
    // the first catch-up read (8 items) fills the socket: paused again before the second read
    expect(h.stream.state).toBe("paused");
    expect(await h.slow()).toBe(1);
    const reads = log.reads.length;
    expect(h.seqs()).toEqual(range(1, 17));
    h.writer.growth = 0;
    h.writer.drain();
    await idle();
    expect(log.reads.length).toBeGreaterThan(reads);
    expect(h.seqs()).toEqual(range(1, 42));
    expect(h.stream.state).toBe("live");
    expect(await h.slow()).toBe(0);
  });

  it("a read is started at the mark, not above it", async () => {
    const log = new ScriptedLog();
    log.commit(2);
    const h = harness(log, { highWaterBytes: 100 });
    h.writer.buffered = 100;
    await idle();
    expect(h.seqs()).toEqual([1, 2]);
  });
});

describe("follow stream: catch-up and metrics", () => {
  it("a catch-up of several reads observes the follower's lag once, at its first read", async () => {
    const { log, h } = await follower(1, { highWaterBytes: 10 });
    h.writer.buffered = 11;
    log.append(1); // pauses
    log.commit(40); // while paused: 2 + 40 = 42, the follower sent 1
    h.writer.drain();
    await idle();
    expect(h.seqs()).toEqual(range(1, 42));
    expect(log.reads.length).toBeGreaterThan(2);
    expect(await h.lag()).toEqual({ count: 1, sum: 41 });
  });

  it("every path runs on a host without metrics", async () => {
    const { log, h } = await follower(3, {
      held: true,
      withoutMetrics: true,
      replayBatch: 4,
      highWaterBytes: 10,
    });
    log.nextRead().release();
    log.append(1); // buffered
    log.autoRelease = true;
    await idle();
    log.commit(1);
    log.append(1); // a live gap: catch-up
    await idle();
    h.writer.buffered = 11;
    log.append(1); // paused
    h.writer.drain();
    await idle();
    log.autoRelease = false;
    log.clear("E2");
    log.notify({ kind: "clear", epoch: "E2" });
    await idle();
    log.append(2);
    log.nextRead().release(); // the epoch changed: reset
    await idle();
    log.nextRead().release();
    log.commit(1);
    log.append(1); // a gap in the buffer
    log.autoRelease = true;
    await idle();
    expect(h.writer.errors).toEqual([]);
    expect(h.logged).toEqual([]);
    expect(h.seqs()).toEqual([...range(1, 7), ...range(1, 4)]);
  });
});

describe("follow stream: endings", () => {
  it("a delete ends the stream with session_retired, during a read or live", async () => {
    const log = new ScriptedLog();
    log.autoRelease = false;
    log.commit(2);
    const reading = harness(log);
    await idle();
    log.notify({ kind: "delete" });
    log.nextRead().release();
    await idle();
    expect(reading.writer.errors.map((e) => e.code)).toEqual(["session_retired"]);
    expect(reading.seqs()).toEqual([]);

    const other = new ScriptedLog("s2");
    other.commit(1);
    const live = harness(other);
    await idle();
    other.notify({ kind: "delete" });
    expect(live.writer.errors.map((e) => e.code)).toEqual(["session_retired"]);
    expect(other.listeners.size).toBe(0);
    expect(live.logged).toEqual([]);
  });

  it("closed while the session is being opened: nothing is sent and nothing is subscribed", async () => {
    const log = new ScriptedLog();
    log.commit(1);
    let open: (handle: SessionReadHandle) => void = () => undefined;
    const h = harness(log, { openRead: () => new Promise((resolve) => (open = resolve)) });
    h.stream.stop();
    open(log.handle());
    await idle();
    expect(h.items()).toEqual([]);
    expect(log.listeners.size).toBe(0);
    expect(log.reads).toEqual([]);

    // a refusal arriving after the close is not sent, nor logged
    let refuse: (err: unknown) => void = () => undefined;
    const late = harness(log, { openRead: () => new Promise((_, reject) => (refuse = reject)) });
    late.stream.stop();
    refuse(new Error("late bug"));
    await idle();
    expect(late.writer.errors).toEqual([]);
    expect(late.logged).toEqual([]);
    expect(late.stream.state).toBe("ended");
    late.stream.stop();
    expect(late.stream.state).toBe("ended");
  });

  it("closed during a read: the read's events are not sent and no other read starts", async () => {
    const { log, h } = await follower(3, { held: true });
    h.stream.stop();
    expect(log.listeners.size).toBe(0);
    log.autoRelease = true;
    log.nextRead().release();
    await idle();
    expect(h.kinds()).toEqual(["opened"]);
    expect(log.reads).toHaveLength(1);
  });

  it("closed between two pages: no further read", async () => {
    const { log, h } = await follower(10, { held: true });
    log.nextRead().release(); // a full page: the stream yields before the next read
    for (let i = 0; i < 5; i++) await Promise.resolve();
    h.stream.stop();
    await idle();
    expect(log.reads).toHaveLength(1);
    expect(h.seqs()).toEqual([1, 2]);
  });

  it("closed while paused: the drain waiter is cancelled and the slow-follower gauge falls back", async () => {
    const { log, h } = await follower(1, { highWaterBytes: 10 });
    h.writer.buffered = 11;
    log.append(1);
    expect(await h.slow()).toBe(1);
    h.stream.stop();
    expect(await h.slow()).toBe(0);
    expect(h.writer.waiters.size).toBe(0);
    expect(log.listeners.size).toBe(0);
  });

  it("closed live, paused or catching up: ended at once, a second stop is harmless, a catch-up read in flight sends nothing", async () => {
    // a second stop: the host shutting down ends the stream, then the socket goes
    const live = harness(new ScriptedLog("live"));
    await idle();
    expect(live.stream.state).toBe("live");
    live.stream.stop();
    expect(live.stream.state).toBe("ended");
    live.stream.stop();
    expect(live.stream.state).toBe("ended");

    const pausedLog = new ScriptedLog("paused");
    const paused = harness(pausedLog, { highWaterBytes: 10 });
    await idle();
    paused.writer.buffered = 11;
    pausedLog.append(1);
    expect(paused.stream.state).toBe("paused");
    paused.stream.stop();
    expect(paused.stream.state).toBe("ended");
    paused.stream.stop();
    expect(paused.stream.state).toBe("ended");

    const log = new ScriptedLog("catching");
    log.commit(1);
    const h = harness(log, { highWaterBytes: 10 });
    await idle();
    h.writer.buffered = 11;
    log.append(2); // pauses
    log.autoRelease = false;
    h.writer.drain(); // the catch-up read waits
    await idle();
    expect(h.stream.state).toBe("catchingUp");
    const sent = h.items().length;
    h.stream.stop();
    expect(h.stream.state).toBe("ended");
    log.nextRead().release();
    await idle();
    expect(h.items()).toHaveLength(sent);
    expect(h.logged).toEqual([]);
    h.stream.stop();
    expect(h.stream.state).toBe("ended");
  });

  it("a refused open ends the stream with its code; a failing read with internal_error, logged once", async () => {
    const log = new ScriptedLog();
    const refused = harness(log, {
      openRead: () => Promise.reject(new SessionmuxError("session_not_found", "no")),
    });
    await idle();
    expect(refused.writer.errors.map((e) => e.code)).toEqual(["session_not_found"]);
    expect(refused.logged).toEqual([]);

    log.autoRelease = false;
    log.commit(1);
    const failing = harness(log);
    await idle();
    const bug = new Error("disk on fire");
    log.nextRead().fail(bug);
    await idle();
    expect(failing.writer.errors.map((e) => e.code)).toEqual(["internal_error"]);
    expect(failing.logged).toEqual([{ err: bug, context: "session.follow s1" }]);
    expect(log.listeners.size).toBe(0);
  });

  it("a failure while pushing a live commit ends the stream with internal_error", async () => {
    const { log, h } = await follower(1);
    h.writer.failNextSend = new Error("socket bug");
    log.append(1);
    expect(h.writer.errors.map((e) => e.code)).toEqual(["internal_error"]);
    expect(h.logged.map((l) => l.context)).toEqual(["session.follow s1"]);
    expect(log.listeners.size).toBe(0);
    log.append(1);
    expect(h.writer.errors).toHaveLength(1);
  });
});

/** The open is tried again `waitMs` (fake time) after the last try, and not a millisecond before. */
async function triedAgainAfter(waitMs: number, opens: () => number): Promise<void> {
  const before = opens();
  vi.advanceTimersByTime(waitMs - 1);
  await idle();
  expect(opens()).toBe(before);
  vi.advanceTimersByTime(1);
  await idle();
  expect(opens()).toBe(before + 1);
}

describe("follow stream: a log read the store failed retryably", () => {
  beforeEach(() => {
    // each wait its whole step (a wait is between half and all of it, at random)
    vi.spyOn(Math, "random").mockReturnValue(1);
  });
  afterEach(() => {
    vi.useRealTimers();
    vi.restoreAllMocks();
  });
  const lost = () => new SessionmuxError("persistence_failure", "the database connection was lost");

  it("is tried again with a growing wait, from the same cursor; commits made meanwhile arrive once, in order", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "Date"] });
    const log = new ScriptedLog();
    log.commit(3);
    const h = harness(log, { afterSeq: 1 });
    await idle();
    expect(h.seqs()).toEqual([2, 3]);
    log.append(1); // live
    h.writer.buffered = 2_000;
    log.append(1); // pauses
    log.autoRelease = false;
    h.writer.drain(); // the catch-up read
    await idle();
    log.nextRead().fail(lost());
    await idle();
    expect(h.stream.state).toBe("catchingUp");
    log.append(2); // buffered while the stream waits
    vi.advanceTimersByTime(249);
    await idle();
    expect(log.pending).toHaveLength(0);
    vi.advanceTimersByTime(1);
    await idle();
    log.nextRead().fail(lost());
    await idle();
    vi.advanceTimersByTime(499);
    await idle();
    expect(log.pending).toHaveLength(0);
    vi.advanceTimersByTime(1);
    await idle();
    log.append(1);
    log.nextRead().release();
    await idle();
    expect(log.reads.slice(-3).map((r) => r.afterSeq)).toEqual([4, 4, 4]);
    expect(h.seqs()).toEqual(range(2, 8));
    expect(h.stream.state).toBe("live");
    expect(h.writer.errors).toEqual([]);
    expect(h.logged).toEqual([]);
    expect(vi.getTimerCount()).toBe(0);
    log.append(1);
    expect(h.seqs()).toEqual(range(2, 9));
  });

  it("waits between half and all of each step, at random: streams a blip failed together read again apart", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "Date"] });
    vi.spyOn(Math, "random").mockReturnValue(0);
    const log = new ScriptedLog();
    log.commit(2);
    let opens = 0;
    harness(log, {
      afterSeq: 1,
      openRead: () => (++opens <= 2 ? Promise.reject(lost()) : Promise.resolve(log.handle())),
    });
    await idle();
    // the shortest waits: half of 250 ms, then half of 500 ms
    await triedAgainAfter(125, () => opens);
    await triedAgainAfter(250, () => opens);
    expect(opens).toBe(3);
  });

  it("ends the stream with persistence_failure once the failures in a row lasted the stated total", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "Date"] });
    const log = new ScriptedLog();
    log.commit(2);
    log.autoRelease = false;
    const h = harness(log, { readRetryMs: 3_000 });
    await idle();
    let elapsed = 0;
    const waits: number[] = [];
    while (h.writer.errors.length === 0) {
      log.nextRead().fail(lost());
      await idle();
      if (h.writer.errors.length > 0) break;
      let waited = 0;
      while (log.pending.length === 0) {
        vi.advanceTimersByTime(50);
        waited += 50;
        await idle();
      }
      waits.push(waited);
      elapsed += waited;
    }
    // 250, 500, 1000 ms, then what is left of the 3 s
    expect(waits).toEqual([250, 500, 1000, 1250]);
    expect(elapsed).toBe(3_000);
    expect(h.writer.errors.map((e) => ({ code: e.code, retryable: e.retryable }))).toEqual([
      { code: "persistence_failure", retryable: true },
    ]);
    expect(h.seqs()).toEqual([]);
    expect(h.stream.state).toBe("ended");
    expect(log.listeners.size).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
  });

  it("stops waiting when the stream is closed: no timer is left and no read is made", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "Date"] });
    const log = new ScriptedLog();
    log.commit(1);
    log.autoRelease = false;
    const h = harness(log);
    await idle();
    log.nextRead().fail(lost());
    await idle();
    expect(vi.getTimerCount()).toBe(1);
    h.stream.stop();
    await idle();
    expect(vi.getTimerCount()).toBe(0);
    vi.advanceTimersByTime(10_000);
    await idle();
    expect(log.reads).toHaveLength(1);
    expect(h.writer.errors).toEqual([]);
    expect(log.listeners.size).toBe(0);
  });

  it("an open the store failed is tried again the same way, sending nothing meanwhile; then it opens from its cursor", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "Date"] });
    const log = new ScriptedLog();
    log.commit(2);
    let opens = 0;
    const h = harness(log, {
      afterSeq: 1,
      // the first two fail, as over a lost connection
      openRead: () => (++opens <= 2 ? Promise.reject(lost()) : Promise.resolve(log.handle())),
    });
    await idle();
    expect(opens).toBe(1);
    // open and quiet: no item, no error, nothing subscribed, one timer
    expect(h.items()).toEqual([]);
    expect(h.writer.errors).toEqual([]);
    expect(h.stream.state).toBe("opening");
    expect(log.listeners.size).toBe(0);
    expect(vi.getTimerCount()).toBe(1);
    log.commit(1); // committed while the open waits: the replay holds it
    await triedAgainAfter(250, () => opens);
    await triedAgainAfter(500, () => opens);
    expect(opens).toBe(3);
    expect(h.items()[0]).toEqual({ kind: "opened", epoch: "E1", headSeq: 3 });
    expect(h.seqs()).toEqual([2, 3]);
    expect(h.kinds().filter((k) => k !== "events")).toEqual(["opened", "caughtUp"]);
    expect(h.stream.state).toBe("live");
    expect(h.writer.errors).toEqual([]);
    expect(h.logged).toEqual([]);
    expect(vi.getTimerCount()).toBe(0);
    log.append(1);
    expect(h.seqs()).toEqual([2, 3, 4]);
  });

  it("an open the store failed for the stated total ends the stream with persistence_failure, nothing else sent", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "Date"] });
    const log = new ScriptedLog();
    log.commit(1);
    let opens = 0;
    const h = harness(log, {
      readRetryMs: 1_000,
      openRead: () => {
        opens += 1;
        return Promise.reject(lost());
      },
    });
    await idle();
    // 250, 500 ms, then what is left of the second
    for (const wait of [250, 500, 250]) {
      expect(h.writer.errors).toEqual([]);
      vi.advanceTimersByTime(wait);
      await idle();
    }
    expect(opens).toBe(4);
    expect(h.writer.errors.map((e) => ({ code: e.code, retryable: e.retryable }))).toEqual([
      { code: "persistence_failure", retryable: true },
    ]);
    expect(h.items()).toEqual([]);
    expect(h.stream.state).toBe("ended");
    expect(vi.getTimerCount()).toBe(0);
  });

  it("closed while a failed open waits: no timer is left and the session is not opened again", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "Date"] });
    const log = new ScriptedLog();
    let opens = 0;
    const h = harness(log, {
      openRead: () => {
        opens += 1;
        return opens === 1 ? Promise.reject(lost()) : Promise.resolve(log.handle());
      },
    });
    await idle();
    expect(vi.getTimerCount()).toBe(1);
    h.stream.stop();
    await idle();
    expect(vi.getTimerCount()).toBe(0);
    vi.advanceTimersByTime(10_000);
    await idle();
    expect(opens).toBe(1);
    expect(h.items()).toEqual([]);
    expect(h.writer.errors).toEqual([]);
    expect(log.listeners.size).toBe(0);
    expect(h.stream.state).toBe("ended");
  });

  it("an open refused otherwise is answered at once, and not tried again", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "Date"] });
    for (const error of [new SessionmuxError("session_not_found", "no"), new Error("bug")]) {
      let opens = 0;
      const h = harness(new ScriptedLog(), {
        openRead: () => {
          opens += 1;
          return Promise.reject(error);
        },
      });
      await h.started;
      expect(h.writer.errors.map((e) => e.code)).toEqual([
        error instanceof SessionmuxError ? error.code : "internal_error",
      ]);
      expect(h.items()).toEqual([]);
      vi.advanceTimersByTime(60_000);
      await idle();
      expect(opens).toBe(1);
      expect(vi.getTimerCount()).toBe(0);
    }
  });

  it("does not retry an error that is not the store's retryable one", async () => {
    const log = new ScriptedLog();
    log.commit(1);
    log.autoRelease = false;
    const h = harness(log);
    await idle();
    log.nextRead().fail(new SessionmuxError("session_retired", "gone"));
    await idle();
    expect(h.writer.errors.map((e) => e.code)).toEqual(["session_retired"]);
    expect(log.reads).toHaveLength(1);
  });
});
