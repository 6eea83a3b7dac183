import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { heldBytes } from "../../support/held-bytes.js";
import { startTestHost, type TestHost } from "../../support/host.js";
import type { MuxPeer } from "../../support/mux-peer.js";
import { appendDeltas, connect, createSession, headSeq } from "./mux-fixture.js";

const EVENTS = 100_000;
const HEALTHY = 10;
const MiB = 1024 * 1024;

describe("slow follower (protocol-v1 §5, reliability.md)", () => {
  let host: TestHost;
  const peers: MuxPeer[] = [];
  beforeAll(async () => {
    host = await startTestHost();
  });
  afterAll(async () => {
    for (const p of peers) await p.disconnect();
    await host?.dispose();
  });

  it("one stalled reader among 10 healthy ones: bounded host memory, never dropped, catches up exactly", async () => {
    const owner = await connect(host);
    peers.push(owner);
    const sessionId = await createSession(owner);
    const start = await headSeq(host, sessionId);

    const healthy: { peer: MuxPeer; id: number }[] = [];
    for (let i = 0; i < HEALTHY; i++) {
      const peer = await connect(host, { keepEvents: false });
      peers.push(peer);
      healthy.push({ peer, id: peer.follow(sessionId, { afterSeq: start }) });
    }
    const slow = await connect(host, { keepEvents: false });
    peers.push(slow);
    const slowId = slow.follow(sessionId, { afterSeq: start });
    for (const f of [...healthy, { peer: slow, id: slowId }])
      await f.peer.waitItem(f.id, (i) => i.kind === "caughtUp");
    slow.pause();

    const before = heldBytes();
    let peak = 0;
    // ~150 bytes per event on the wire: about 15 MiB the stalled reader does not read.
    const text = "y".repeat(100);
    let end = start;
    for (let done = 0; done < EVENTS; done += 10_000) {
      end = await appendDeltas(host, sessionId, 10_000, 1_000, text);
      peak = Math.max(peak, heldBytes() - before);
    }
    for (const f of healthy) await f.peer.waitSeq(f.id, end, 60_000);
    peak = Math.max(peak, heldBytes() - before);

    const slowGauge = async () => (await host.metrics.slowFollowers.get()).values[0]?.value ?? 0;
    expect(await slowGauge()).toBe(1);
    expect(slow.ws.readyState).toBe(slow.ws.OPEN);
    expect(slow.lastSeq(slowId)).toBeLessThan(end);
    expect(peak).toBeLessThan(32 * MiB);

    slow.resume();
    await slow.waitSeq(slowId, end, 60_000);
    expect(slow.violations).toEqual([]);
    expect(slow.lastSeq(slowId)).toBe(end);
    expect(slow.terminal(slowId)).toBeUndefined();
    for (const f of healthy) {
      expect(f.peer.violations).toEqual([]);
      expect(f.peer.lastSeq(f.id)).toBe(end);
    }
    expect(await slowGauge()).toBe(0);

    // Live again: the next commit reaches the formerly slow follower by push.
    const next = await appendDeltas(host, sessionId, 1);
    await slow.waitSeq(slowId, next);
    expect(slow.violations).toEqual([]);
    console.info(`slow follower: peak growth ${(peak / MiB).toFixed(1)} MiB over ${EVENTS} events`);
  });
});
