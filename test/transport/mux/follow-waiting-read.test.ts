import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { CommitListener, CommitNotice } from "../../../src/store/session-store.js";
import { gate } from "../../support/gate.js";
import { gc } from "../../support/gc.js";
import { startTestHost, type TestHost } from "../../support/host.js";
import type { MuxPeer } from "../../support/mux-peer.js";
import { until } from "../../support/until.js";
import { withMembers } from "../../support/with-members.js";
import { appendDeltas, connect, createSession, headSeq } from "./mux-fixture.js";

/** More than loopback buffers take from a peer that does not read, so the backlog stays past the mark. */
const BIG_LOG_DELTAS = 16_000;
const WAITING = 16;
const COMMITS = 50;

/**
 * A follow stream waiting for its turn to read its log (the socket's eight reads are taken and
 * its backlog is past the mark, so the read gate waits for it to drain) keeps no commit notice of
 * its session: its read, issued once the socket drains, holds them. It kept each, up to 2,000
 * events of any size, for as long as the peer did not read: on a real `serve`, one ordinary token
 * following 64 sessions so and prompting them with 120 KB prompts made the host hold 183 MiB more
 * after a full collection for 150 MB written, bounded only by its storage quota.
 */
describe("a follow stream waiting for its log read", () => {
  let host: TestHost;
  /** Notices given to followers of the tracked sessions, held weakly. */
  const told: WeakRef<CommitNotice>[] = [];
  const tracked = new Set<string>();
  let subscribed = 0;
  /** The long log's reads wait for it: every other stream is then at the read gate. */
  const bigReads = gate();
  let big = "";
  let bigReadsAsked = 0;
  beforeAll(async () => {
    host = await startTestHost({
      storeView: (store) =>
        withMembers(store, {
          subscribe: (sessionId: string, listener: CommitListener) => {
            if (tracked.has(sessionId)) subscribed++;
            return store.subscribe(sessionId, (notice) => {
              if (tracked.has(sessionId)) told.push(new WeakRef(notice));
              listener(notice);
            });
          },
          readAfterEncoded: async (...args: Parameters<typeof store.readAfterEncoded>) => {
            if (args[0] === big) {
              bigReadsAsked++;
              await bigReads.promise;
            }
            return store.readAfterEncoded(...args);
          },
        }),
    });
  });
  afterAll(async () => {
    await host?.dispose();
  });

  it("holds none of its session's commits while the socket does not read, and then reads every event once", async () => {
    const writer = await connect(host);
    big = await createSession(writer);
    await appendDeltas(host, big, BIG_LOG_DELTAS, 1000, "x".repeat(1000));
    const waiting: string[] = [];
    for (let i = 0; i < WAITING; i++) {
      const sessionId = await createSession(writer);
      await appendDeltas(host, sessionId, 3);
      waiting.push(sessionId);
      tracked.add(sessionId);
    }
    const peer: MuxPeer = await connect(host, { keepEvents: false });
    peer.pause();
    // eight reads of the long log take the socket's reads and push its backlog past the mark; the
    // others wait for their turn, each with its commit listener installed
    for (let i = 0; i < 8; i++) peer.follow(big);
    await until(() => bigReadsAsked === 8, 10_000, "the long log's reads under way");
    const ids = waiting.map((sessionId) => peer.follow(sessionId));
    await until(() => subscribed === WAITING, 10_000, "every other stream subscribed");
    bigReads.open();
    await until(
      async () => ((await host.metrics.bytesOut.get()).values[0]?.value ?? 0) > 4 * 1024 * 1024,
      10_000,
      "the long log's reads fill the backlog",
    );
    for (let i = 0; i < COMMITS; i++) for (const sessionId of waiting) await appendDeltas(host, sessionId, 1);
    expect(told.length).toBeGreaterThanOrEqual(WAITING * COMMITS);
    gc();
    await new Promise((resolve) => setTimeout(resolve, 20));
    gc();
    expect(told.filter((ref) => ref.deref() !== undefined)).toHaveLength(0);
    peer.resume();
    for (const [i, sessionId] of waiting.entries()) {
      const end = await headSeq(host, sessionId);
      await peer.waitSeq(ids[i]!, end, 60_000);
    }
    expect(peer.violations).toEqual([]);
    await peer.disconnect();
    await writer.disconnect();
  });
});
