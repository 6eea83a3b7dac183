import { setImmediate as yieldToEventLoop } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AsyncStoreStats, asyncStore, seededRandom } from "../../support/async-store.js";
import { startTestHost, type TestHost } from "../../support/host.js";
import type { MuxPeer } from "../../support/mux-peer.js";
import { appendDeltas, connect, createSession, expectRange, headSeq } from "./mux-fixture.js";

const SEED = Number(process.env.ASYNC_STORE_SEED ?? Date.now() % 1_000_000);
const WRITERS = 2;
/** The bound on the load: appends over all writers. */
const MAX_APPENDS = 4_000;
const FOLLOWERS = 30;
/** More followers open (at most this many) until every path was taken. */
const MAX_FOLLOWERS = 150;
/** Events in the log before the followers open: replayed in many reads. */
const BACKLOG = 500;
/**
 * Small pages, so a read is one of many and the buffer of commits during it holds 4 pages (20
 * events): past that it overflows and the stream reads again (the gap path).
 */
const REPLAY_BATCH = 5;
/**
 * One append in ten carries more than the buffer holds, so a single commit landing during a
 * follower's last read takes the gap path however slowly the machine commits; the others carry
 * 1–3 events, which a read continues with (buffered) or already held (overlap).
 */
const LARGE_APPEND_SHARE = 0.1;
const LARGE_APPEND = REPLAY_BATCH * 4 + 1;

/**
 * The follow stream's continuation paths (src/transport/mux/follow-stream.ts), which a synchronous
 * store never takes: commits land while a log read is in flight, so after the read the stream
 * continues with buffered commits ("buffered"), skips commits the read already held ("overlap"),
 * or reads again when the buffered commits do not continue it ("gap"). Each path must run here,
 * and every follower must still get exactly afterSeq+1 … head, as the host sent it.
 */
describe(`follow continuation paths with reads interleaved with commits (seed ${SEED})`, () => {
  let host: TestHost;
  let stats: AsyncStoreStats;
  beforeAll(async () => {
    host = await startTestHost({
      mux: { replayBatch: REPLAY_BATCH },
      storeView: (store) => {
        const double = asyncStore(store, { random: seededRandom(SEED), maxDelayMs: 4 });
        stats = double.stats;
        return double.store;
      },
    });
  });
  afterAll(async () => {
    await host?.dispose();
  });

  it("takes the buffered, overlap and gap paths, and every follower sees exactly afterSeq+1 … head", async () => {
    const random = seededRandom(SEED + 1);
    const peers = [await connect(host), await connect(host), await connect(host)];
    const sessionId = await createSession(peers[0]!);
    const followers: { peer: MuxPeer; id: number; afterSeq: number }[] = [];
    let head = await appendDeltas(host, sessionId, BACKLOG, 100);
    const paths = async () =>
      Object.fromEntries(
        (await host.metrics.followContinuations.get()).values.map((v) => [v.labels.path, v.value]),
      ) as Partial<Record<"buffered" | "overlap" | "gap", number>>;
    let writing = true;
    let appends = 0;
    const writers = Array.from({ length: WRITERS }, async (_, w) => {
      while (writing && appends < MAX_APPENDS) {
        appends++;
        const size = random() < LARGE_APPEND_SHARE ? LARGE_APPEND : 1 + Math.floor(random() * 3);
        const outcome = await host.store.append(
          sessionId,
          Array.from({ length: size }, (_, j) => ({
            type: "assistant/delta" as const,
            data: { turnId: `w${w}`, text: `${appends}.${j}` },
          })),
        );
        if (outcome.status !== "appended") throw new Error(outcome.status);
        head = Math.max(head, outcome.events.at(-1)!.seq);
        await yieldToEventLoop();
      }
    });
    // Followers open at random cursors into a backlog, so each replays it in many small reads
    // while the writers commit; the writers stop once every path was taken (or after MAX_APPENDS,
    // and the assertions below fail).
    let openedAt = 0;
    while (appends < MAX_APPENDS) {
      if (followers.length < MAX_FOLLOWERS && head >= openedAt + 20) {
        openedAt = head;
        const peer = peers[followers.length % peers.length]!;
        const afterSeq = Math.floor(random() * (head + 1));
        followers.push({ peer, id: peer.follow(sessionId, { afterSeq }), afterSeq });
      }
      const taken = await paths();
      if (followers.length >= FOLLOWERS && taken.buffered && taken.overlap && taken.gap) break;
      await yieldToEventLoop();
    }
    writing = false;
    await Promise.all(writers);
    const end = await headSeq(host, sessionId);
    for (const f of followers) await f.peer.waitSeq(f.id, end, 30_000);
    for (const f of followers) {
      expectRange(f.peer.events(f.id), f.afterSeq + 1, end);
      expect(f.peer.terminal(f.id)).toBeUndefined();
    }
    for (const peer of peers) expect(peer.violations).toEqual([]);

    const taken = await paths();
    process.stdout.write(
      `follow paths (seed ${SEED}): ${JSON.stringify(taken)} appends=${appends} reads reordered=${stats.reorderedReads} ` +
        `commits during reads=${stats.commitsDuringReads}\n`,
    );
    expect(followers.length).toBeGreaterThanOrEqual(FOLLOWERS);
    expect(stats.commitsDuringReads).toBeGreaterThan(0);
    expect(stats.reorderedReads).toBeGreaterThan(0);
    expect(taken.buffered ?? 0).toBeGreaterThan(0);
    expect(taken.overlap ?? 0).toBeGreaterThan(0);
    expect(taken.gap ?? 0).toBeGreaterThan(0);
    for (const peer of peers) await peer.disconnect();
  });
});
