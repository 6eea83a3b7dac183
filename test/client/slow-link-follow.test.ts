import { afterEach, describe, expect, it, vi } from "vitest";
import { decodeFrame } from "../../protocol/codec.js";
import { Limits } from "../../protocol/limits.js";
import { followSession } from "../../src/client/follow-session.js";
import { browserLikeClient } from "../support/browser-like-client.js";
import { FollowWireCheck } from "../support/follow-wire-check.js";
import { ADMIN_TOKEN, startTestHost, type TestHost } from "../support/host.js";
import { startTcpProxy } from "../support/tcp-proxy.js";
import { hostMessageTap } from "../support/ws-frame-reader.js";
import { peerFixture } from "./peer-fixture.js";

const KIB = 1024;
/** An item's frame around its value: the map header, `type`, `id` and the `value` key. */
const ITEM_FRAME_BYTES = 32;
const WIDE = { maxStrBytes: 2 ** 22, maxArrayLength: 1_000_000, maxValues: 2 ** 25 };

const { cleanups, track } = peerFixture();
let host: TestHost | undefined;
afterEach(async () => {
  await host?.dispose();
  host = undefined;
});

const delta = (n: number, bytes: number) => ({
  type: "assistant/delta" as const,
  data: { turnId: "t", text: `${n} ${"x".repeat(bytes)}` },
});

/** The host's messages through the proxy that were over the bound and did not hold one event alone. */
function oversizedMessages(): {
  tap: () => { fromClient(chunk: Buffer): void; fromHost(chunk: Buffer): void };
  found: string[];
  largest: () => number;
} {
  const found: string[] = [];
  let largest = 0;
  return {
    found,
    largest: () => largest,
    tap: hostMessageTap((message) => {
      largest = Math.max(largest, message.length);
      if (message.length <= Limits.streamItemBytes + ITEM_FRAME_BYTES) return;
      const frame = decodeFrame(message, WIDE) as { value?: { kind?: string; events?: unknown[] } };
      if (frame.value?.kind !== "events" || frame.value.events?.length !== 1)
        found.push(`${message.length} bytes, ${frame.value?.events?.length ?? 0} events`);
    }),
  };
}

describe("session.follow over a slow link (protocol-v1 §5: events items of at most 64 KiB)", () => {
  it("a browser-like follower replays 3 MiB over a 192 KiB/s link and takes a 600 KiB commit live, on one socket, every event once", async () => {
    host = await startTestHost();
    const sessionId = "long-session";
    await host.host.call({ name: "admin", admin: true }, "session.create", { sessionId });
    // 1,500 events of 2 KiB (a replay read of 500 of them was one 1 MiB message) and two of
    // 100 KiB, each of which still goes alone
    for (let start = 0; start < 1_500; start += 100) {
      const events = Array.from({ length: 100 }, (_, i) => delta(start + i, 2 * KIB));
      if (start === 700) events.splice(50, 0, delta(-1, 100 * KIB), delta(-2, 100 * KIB));
      expect((await host.store.append(sessionId, events)).status).toBe("appended");
    }
    const headSeq = 1 + 1_502;
    const wire = new FollowWireCheck();
    const sizes = oversizedMessages();
    const proxy = await startTcpProxy(host.port, {
      hostBytesPerSecond: 192 * KIB,
      tap: () => {
        const follow = wire.connection();
        const size = sizes.tap();
        return {
          fromClient: (chunk) => {
            follow.fromClient(chunk);
            size.fromClient(chunk);
          },
          fromHost: (chunk) => {
            follow.fromHost(chunk);
            size.fromHost(chunk);
          },
        };
      },
    });
    cleanups.push(() => proxy.stop());
    const client = track(
      browserLikeClient(host.wsUrl.replace(`:${host.port}`, `:${proxy.port}`), ADMIN_TOKEN),
    );
    const seqs: number[] = [];
    const failures: unknown[] = [];
    let caughtUp: number | undefined;
    const sub = followSession(client, sessionId).subscribe({
      next: (u) => {
        if (u.kind === "events") for (const e of u.events) seqs.push(e.seq);
        if (u.kind === "caughtUp") caughtUp = u.seq;
      },
      error: (e: unknown) => failures.push(e),
    });
    cleanups.push(() => sub.unsubscribe());
    // until caught up, or until the first sign it will not be (a failure, a second socket)
    const settled = () => caughtUp !== undefined || failures.length > 0 || proxy.accepted > 1;
    await vi.waitFor(() => expect(settled()).toBe(true), { timeout: 90_000, interval: 100 });
    expect(failures).toEqual([]);
    expect(proxy.accepted).toBe(1);
    expect(caughtUp).toBe(headSeq);
    expect(seqs).toEqual(Array.from({ length: headSeq }, (_, i) => i + 1));
    // live: one commit of 300 such events reaches the follower as items of its own
    const live = Array.from({ length: 300 }, (_, i) => delta(10_000 + i, 2 * KIB));
    expect((await host.store.append(sessionId, live)).status).toBe("appended");
    await vi.waitFor(
      () => expect(seqs.length >= headSeq + 300 || failures.length > 0 || proxy.accepted > 1).toBe(true),
      { timeout: 60_000, interval: 100 },
    );
    expect(failures).toEqual([]);
    expect(proxy.accepted).toBe(1);
    expect(seqs).toEqual(Array.from({ length: headSeq + 300 }, (_, i) => i + 1));
    expect(wire.violations).toEqual([]);
    expect(wire.events).toBe(headSeq + 300);
    expect(sizes.found).toEqual([]);
    // the 100 KiB events crossed, each alone
    expect(sizes.largest()).toBeGreaterThan(100 * KIB);
    expect(proxy.cuts).toBe(0);
    expect(proxy.accepted).toBe(1);
  }, 150_000);
});
