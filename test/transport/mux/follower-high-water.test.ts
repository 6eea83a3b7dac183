import { describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../../support/host.js";
import { hostTeardown } from "../../support/host-teardown.js";
import { appendDeltas, connect, createSession, headSeq } from "./mux-fixture.js";

/**
 * A follower's high-water mark below the TCP socket's own (16 KiB): its backlog then leaves the
 * host without a 'drain' event, and the paused follower must still be woken to send the rest.
 */
const { peers, keep } = hostTeardown<TestHost>();

describe("a follower with a high-water mark below the socket's own", () => {
  it("pauses and resumes through every burst: it sees every event exactly once", async () => {
    const host = keep(await startTestHost({ mux: { followerHighWaterBytes: 1024 } }));
    const owner = await connect(host);
    peers.push(owner);
    const sessionId = await createSession(owner);
    const start = await headSeq(host, sessionId);
    const follower = await connect(host);
    peers.push(follower);
    const id = follower.follow(sessionId, { afterSeq: start });
    await follower.waitItem(id, (i) => i.kind === "caughtUp");
    const slowGauge = async () => (await host.metrics.slowFollowers.get()).values[0]?.value ?? 0;
    let end = start;
    for (let burst = 0; burst < 5; burst++) {
      // two commits in one group commit, so their notices come in one tick: the first one's ~2 KiB
      // is still in the socket's cork when the second finds the follower past its mark
      const heads = await Promise.all([
        appendDeltas(host, sessionId, 10, 10, "z".repeat(200)),
        appendDeltas(host, sessionId, 10, 10, "z".repeat(200)),
      ]);
      end = Math.max(...heads);
      await follower.waitSeq(id, end, 10_000);
    }
    expect(follower.lastSeq(id)).toBe(end);
    expect(follower.violations).toEqual([]);
    expect(await slowGauge()).toBe(0);
  });
});
