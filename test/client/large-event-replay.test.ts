import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { Limits } from "../../protocol/limits.js";
import { followSession } from "../../src/client/follow-session.js";
import { createNodeClient, type SessionmuxClient } from "../../src/client/node.js";
import { ADMIN_TOKEN, startTestHost, type TestHost } from "../support/host.js";
import { startTcpProxy, type TcpProxy } from "../support/tcp-proxy.js";
import { hostMessageTap } from "../support/ws-frame-reader.js";

/** What one host message may hold: one event alone, the largest an event may be, and its frame. */
const MESSAGE_BOUND = Limits.maxEventBytes + 4096;

let host: TestHost;
let proxy: TcpProxy;
let client: SessionmuxClient;
/** The largest message the host sent through the proxy. */
let largest = 0;

beforeAll(async () => {
  host = await startTestHost();
  proxy = await startTcpProxy(host.port, {
    tap: hostMessageTap((message) => {
      largest = Math.max(largest, message.length);
    }),
  });
  client = createNodeClient({ url: `ws://127.0.0.1:${proxy.port}/api/remote.mux`, token: ADMIN_TOKEN });
});
afterAll(async () => {
  await client?.close();
  await proxy?.stop();
  await host?.dispose();
});

const large = (n: number) => ({
  type: "assistant/delta" as const,
  data: { turnId: "t", text: `${n} ${"x".repeat(400_000)}` },
});

describe("a session whose events are large", () => {
  it("replays a 24 MB log and a 4 MB commit live to a follower, in messages it can take", async () => {
    const sessionId = "large-events";
    await client.create({ sessionId });
    // one commit of 60 events of 400 KB: a replay page of 500 events would be a 24 MB message
    const outcome = await host.store.append(
      sessionId,
      Array.from({ length: 60 }, (_, i) => large(i)),
    );
    expect(outcome.status).toBe("appended");
    const seqs: number[] = [];
    const failures: unknown[] = [];
    let caughtUp = false;
    const sub = followSession(client, sessionId).subscribe({
      next: (u) => {
        if (u.kind === "events") for (const e of u.events) seqs.push(e.seq);
        if (u.kind === "caughtUp") caughtUp = true;
      },
      error: (e: unknown) => failures.push(e),
    });
    try {
      await vi.waitFor(() => expect(caughtUp).toBe(true), { timeout: 30_000, interval: 50 });
      expect(seqs).toEqual(Array.from({ length: 61 }, (_, i) => i + 1));
      // live: one commit of 10 such events (4 MB) reaches the follower as several items
      expect(
        (
          await host.store.append(
            sessionId,
            Array.from({ length: 10 }, (_, i) => large(i)),
          )
        ).status,
      ).toBe("appended");
      await vi.waitFor(() => expect(seqs.length).toBeGreaterThanOrEqual(71), {
        timeout: 30_000,
        interval: 50,
      });
      expect(seqs).toEqual(Array.from({ length: 71 }, (_, i) => i + 1));
      expect(failures).toEqual([]);
      // each 400 KB event went alone, in a message of its own
      expect(largest).toBeGreaterThan(400_000);
      expect(largest).toBeLessThan(400_000 + 4096);
      expect(largest).toBeLessThan(MESSAGE_BOUND);
      // the client never had to drop its connection over a message
      expect(proxy.accepted).toBe(1);
    } finally {
      sub.unsubscribe();
    }
  });
});
