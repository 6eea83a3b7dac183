import { describe, expect, inject, it } from "vitest";
import type { SessionEvent } from "../../protocol/index.js";
import { CLUSTER_TEST_TIMEOUT_MS, oneTo, threeHosts } from "./cluster.js";
import { clusterFixture } from "./cluster-fixture.js";

const pgUrl = inject("pgUrl");
const fixture = clusterFixture(pgUrl);

const peer = fixture.peer;

const ofType = (events: SessionEvent[], type: string) => events.filter((event) => event.type === type);

describe.skipIf(!pgUrl)("three serve processes on one PostgreSQL schema", () => {
  it(
    "followers on B and C see A's commits live, exactly once on the wire",
    async () => {
      const cluster = await fixture.start();
      const [a, b, c] = threeHosts(cluster);
      const writer = await peer(a.wsUrl);
      const onB = await peer(b.wsUrl);
      const onC = await peer(c.wsUrl);
      await writer.call("session.create", { sessionId: "shared" });
      const followB = onB.follow("shared");
      const followC = onC.follow("shared");
      await onB.waitSeq(followB, 1);
      await onC.waitSeq(followC, 1);

      // The turn waits for an answer: B and C must see its request before anything can end it,
      // so what they show is live, not read back after the fact.
      await writer.call("session.prompt", {
        sessionId: "shared",
        text: "/approve deploy",
        clientMessageId: "p1",
      });
      for (const [follower, stream] of [
        [onB, followB],
        [onC, followC],
      ] as const) {
        await expect.poll(() => ofType(follower.events(stream), "interaction/requested").length).toBe(1);
        expect(ofType(follower.events(stream), "turn/end")).toEqual([]);
      }
      const requested = ofType(onB.events(followB), "interaction/requested")[0]!;
      const { interactionId } = requested.data as { interactionId: string };
      // answered on C: the call reaches the owner on A
      await onC.call("session.respond", { interactionId, response: { outcome: "approve" } }, 60_000);

      await expect.poll(() => ofType(onB.events(followB), "turn/end").length, { timeout: 60_000 }).toBe(1);
      await expect.poll(() => ofType(onC.events(followC), "turn/end").length, { timeout: 60_000 }).toBe(1);
      // a second turn, streamed in several commits
      await writer.call("session.prompt", {
        sessionId: "shared",
        text: "/stream 40 5",
        clientMessageId: "p2",
      });
      await expect.poll(() => ofType(onB.events(followB), "turn/end").length, { timeout: 60_000 }).toBe(2);
      await expect.poll(() => ofType(onC.events(followC), "turn/end").length, { timeout: 60_000 }).toBe(2);

      const log = await cluster.logSeqs("shared");
      expect(log).toEqual(oneTo(log.length));
      expect(log.length).toBeGreaterThan(45);
      await onB.waitSeq(followB, log.length);
      await onC.waitSeq(followC, log.length);
      for (const [follower, stream] of [
        [onB, followB],
        [onC, followC],
      ] as const) {
        // every event once, in order, as the bytes arrived (not repaired by an SDK)
        expect(follower.violations).toEqual([]);
        expect(follower.events(stream).map((event) => event.seq)).toEqual(log);
        expect(follower.terminal(stream)).toBeUndefined();
      }
      expect(ofType(onB.events(followB), "interaction/resolved")).toHaveLength(1);
    },
    CLUSTER_TEST_TIMEOUT_MS,
  );
});
