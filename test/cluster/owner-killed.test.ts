import { describe, expect, inject, it } from "vitest";
import type { SessionEvent } from "../../protocol/index.js";
import type { MuxPeer } from "../support/mux-peer.js";
import { CLUSTER_TEST_TIMEOUT_MS, oneTo, threeHosts } from "./cluster.js";
import { clusterFixture } from "./cluster-fixture.js";

const pgUrl = inject("pgUrl");
const fixture = clusterFixture(pgUrl);

const peer = fixture.peer;

const turnEnds = (events: SessionEvent[]) =>
  events
    .filter((event) => event.type === "turn/end")
    .map((event) => event.data as { turnId: string; state: string });

describe.skipIf(!pgUrl)("kill -9 of the host that owns a session, mid-turn", () => {
  it(
    "keeps followers on other hosts streaming, closes the turn as interrupted, runs the next prompt elsewhere",
    async () => {
      const cluster = await fixture.start();
      const [a, b, c] = threeHosts(cluster);
      const owner = await peer(a.wsUrl);
      const onB = await peer(b.wsUrl);
      const onC = await peer(c.wsUrl);
      await owner.call("session.create", { sessionId: "crash" });
      const followB = onB.follow("crash");
      const followC = onC.follow("crash");
      // a long turn on A: 2,000 chunks, 20 ms apart
      await owner.call("session.prompt", {
        sessionId: "crash",
        text: "/stream 2000 20",
        clientMessageId: "p1",
      });
      const deltas = (follower: MuxPeer, stream: number) =>
        follower.events(stream).filter((event) => event.type === "assistant/delta").length;
      await expect.poll(() => deltas(onB, followB), { timeout: 60_000 }).toBeGreaterThanOrEqual(5);
      await expect.poll(() => deltas(onC, followC), { timeout: 60_000 }).toBeGreaterThanOrEqual(5);
      expect((await cluster.reader.leaseHolder("crash"))?.hostId).toBe(a.hostId);

      await a.kill9();
      owner.ws.terminate();

      // the next prompt lands on B: once A's lease expired, B takes the session over
      const answer = await onB.call<{ queued: boolean; seq?: number }>(
        "session.prompt",
        { sessionId: "crash", text: "after the crash", clientMessageId: "p2" },
        90_000,
      );
      expect(answer.queued === true || typeof answer.seq === "number").toBe(true);
      for (const [follower, stream] of [
        [onB, followB],
        [onC, followC],
      ] as const) {
        await expect.poll(() => turnEnds(follower.events(stream)).length, { timeout: 90_000 }).toBe(2);
        const [first, second] = turnEnds(follower.events(stream));
        expect(first!.state).toBe("interrupted");
        expect(second!.state).toBe("completed");
      }
      expect((await cluster.reader.leaseHolder("crash"))?.hostId).toBe(b.hostId);

      const log = await cluster.logSeqs("crash");
      expect(log).toEqual(oneTo(log.length));
      await onB.waitSeq(followB, log.length);
      await onC.waitSeq(followC, log.length);
      for (const [follower, stream] of [
        [onB, followB],
        [onC, followC],
      ] as const) {
        // the same streams throughout: never ended, never reopened, every event once
        expect(follower.terminal(stream)).toBeUndefined();
        expect(follower.violations).toEqual([]);
        expect(follower.events(stream).map((event) => event.seq)).toEqual(log);
      }
      // the echo of the second prompt is in the log after the interrupted turn
      const text = onC
        .events(followC)
        .filter((event) => event.type === "assistant/delta")
        .map((event) => (event.data as { text: string }).text)
        .join("");
      expect(text).toContain("Echo: after the crash");
    },
    CLUSTER_TEST_TIMEOUT_MS,
  );
});
