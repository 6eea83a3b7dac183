import { once } from "node:events";
import { afterEach, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { decodeFrame, encodeFrame } from "../../protocol/codec.js";
import { settledHeldBytes } from "../support/held-bytes.js";
import { checkHistory, isClean, sumCounts } from "../support/history-checker.js";
import { ADMIN_TOKEN, startTestHost, type TestHost } from "../support/host.js";
import { until } from "../support/until.js";
import { readWholeLog } from "../support/whole-log.js";
import { reportCounts, scaled } from "./torture-scale.js";

const SESSION = "stall";
const HEALTHY = 10;
const MIB = 1024 * 1024;
/** A low mark, so what a paused follower may hold is far below what an unpaused one piles up. */
const HIGH_WATER = MIB;
/**
 * Measured at 100k events, held bytes settled (see `settledHeldBytes`) with the flow paused: 0.6–1.2
 * MiB with pausing at the mark, 0.3–0.4 MiB with no stalled follower at all, 32.6–33.0 MiB when the
 * mark is never reached (1 GiB). The bound sits between with a margin both ways, so a follower
 * that is never paused fails it.
 */
const GROWTH_BOUND = 8 * MIB;

/** A follower that keeps only the seqs it saw, in a buffer allocated up front (no growth during the flow). */
class SeqFollower {
  private readonly buffer: Int32Array;
  count = 0;
  private constructor(
    readonly ws: WebSocket,
    capacity: number,
  ) {
    this.buffer = new Int32Array(capacity);
    ws.on("message", (data: Buffer) => {
      const frame = decodeFrame(data, {
        maxArrayLength: 1 << 20,
        maxStrBytes: 1 << 24,
        maxValues: 1 << 25,
      }) as {
        type: string;
        value?: { kind: string; events?: { seq: number }[] };
      };
      if (frame.type === "item" && frame.value?.kind === "events")
        for (const event of frame.value.events ?? [])
          if (this.count < capacity) this.buffer[this.count++] = event.seq;
    });
    ws.on("error", () => {});
  }

  static async follow(url: string, capacity: number): Promise<SeqFollower> {
    const ws = new WebSocket(url, ["sessionmux.v1"], { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    const follower = new SeqFollower(ws, capacity);
    await once(ws, "open");
    ws.send(encodeFrame({ type: "open", id: 1, method: "session.follow", params: { sessionId: SESSION } }));
    return follower;
  }

  get last(): number {
    return this.count === 0 ? 0 : this.buffer[this.count - 1]!;
  }

  seqs(): number[] {
    return Array.from(this.buffer.subarray(0, this.count));
  }
}

let host: TestHost | undefined;
const followers: SeqFollower[] = [];
afterEach(async () => {
  for (const follower of followers.splice(0)) follower.ws.terminate();
  await host?.dispose();
});

const delta = (i: number) => ({
  type: "assistant/delta" as const,
  data: {
    turnId: "t",
    text: `chunk ${i} of a long streamed answer that a slow reader must not hold in memory. `.repeat(4),
  },
});

describe("torture: a follower that stops reading while 100k events flow", () => {
  it("keeps retained host memory growth under 8 MiB and the stalled follower catches up exactly", async () => {
    const events = scaled(100_000);
    const capacity = events + 10_000;
    host = await startTestHost({ mux: { followerHighWaterBytes: HIGH_WATER } });
    const created = await host.store.create({ sessionId: SESSION, owner: "admin", model: "demo" });
    if (created.status !== "created") throw new Error(created.status);
    // The seqs the appends acknowledged, kept in a buffer allocated before the baseline.
    const acked = new Int32Array(capacity);
    let ackedCount = 0;
    const ack = (events: readonly { seq: number }[]) => {
      for (const event of events) acked[ackedCount++] = event.seq;
    };
    ack(created.events);
    for (let i = 0; i < HEALTHY; i++) followers.push(await SeqFollower.follow(host.wsUrl, capacity));
    const stalled = await SeqFollower.follow(host.wsUrl, capacity);
    followers.push(stalled);
    // Warm the host (code paths, caches, a few batches) before the baseline.
    let head = 1;
    for (let i = 0; i < 20; i++) {
      const outcome = await host.store.append(
        SESSION,
        Array.from({ length: 100 }, (_, j) => delta(j)),
      );
      if (outcome.status !== "appended") throw new Error(outcome.status);
      ack(outcome.events);
      head = outcome.events.at(-1)!.seq;
    }
    await until(() => followers.every((f) => f.last === head), 60_000, "warm-up delivered");
    stalled.ws.pause();
    const healthy = followers.slice(0, HEALTHY);
    const baseline = await settledHeldBytes();
    const rssBaseline = process.memoryUsage().rss;
    let peak = baseline;
    let rssPeak = rssBaseline;
    const sampler = setInterval(() => {
      rssPeak = Math.max(rssPeak, process.memoryUsage().rss);
    }, 200);
    // Held bytes are sampled only when every healthy follower has read to the head and the flow is
    // paused: what the healthy ones have in flight comes and goes with the scheduler and is not
    // what the stalled one makes the host keep.
    const sampleHeld = async (timeoutMs: number) => {
      await until(() => healthy.every((f) => f.last === head), timeoutMs, "healthy followers at the head");
      peak = Math.max(peak, await settledHeldBytes());
    };
    try {
      // The flow: batches the way a busy agent's group commits arrive, bounded in count and time.
      const stopAt = Date.now() + 300_000;
      for (let sent = 0; sent < events && Date.now() < stopAt; sent += 100) {
        const outcome = await host.store.append(
          SESSION,
          Array.from({ length: 100 }, (_, j) => delta(sent + j)),
        );
        if (outcome.status !== "appended") throw new Error(outcome.status);
        ack(outcome.events);
        head = outcome.events.at(-1)!.seq;
        // Pace the producer to the healthy readers so the measured growth is the stalled one's.
        if (sent % 5_000 === 0) await sampleHeld(60_000);
      }
      await sampleHeld(120_000);
    } finally {
      clearInterval(sampler);
    }
    const growth = peak - baseline;
    stalled.ws.resume();
    await until(() => stalled.last === head, 120_000, "stalled follower catches up");

    const read = await readWholeLog(host.store, SESSION);
    const log = read.status === "ok" ? read.events.map((event) => event.seq) : [];
    const acknowledged = acked.subarray(0, ackedCount);
    const reports = followers.map((f) => checkHistory({ acknowledged, log, observed: f.seqs() }));
    reportCounts("stalled-follower", 1, { ...sumCounts(reports), acked: ackedCount });
    process.stdout.write(
      `torture stalled-follower: events=${events} retained growth=${(growth / MIB).toFixed(1)} MiB (bound ${GROWTH_BOUND / MIB} MiB), ` +
        `process RSS growth=${((rssPeak - rssBaseline) / MIB).toFixed(1)} MiB (host and followers share the process)\n`,
    );
    expect(isClean(sumCounts(reports))).toBe(true);
    expect(growth).toBeLessThan(GROWTH_BOUND);
  });
});
