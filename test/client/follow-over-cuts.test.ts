import type { Subscription } from "rxjs";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { SessionEvent } from "../../protocol/index.js";
import { followSession } from "../../src/client/follow-session.js";
import { createNodeClient, type SessionmuxClient } from "../../src/client/node.js";
import { FollowWireCheck } from "../support/follow-wire-check.js";
import { ADMIN_TOKEN, startTestHost, type TestHost } from "../support/host.js";
import { startTcpProxy, type TcpProxy } from "../support/tcp-proxy.js";
import { startCliFollower } from "./cli-follower.js";

const FOLLOWERS = 20;
const CUTS = 200;
const STREAMED = 5_000;
/** session/created, then the streamed events. */
const TOTAL = 1 + STREAMED;
const BATCH = 10;
const fastBackoff = { baseMs: 20, capMs: 500 };

let host: TestHost;
let proxy: TcpProxy;
const wire = new FollowWireCheck();
let admin: SessionmuxClient;

beforeAll(async () => {
  host = await startTestHost();
  proxy = await startTcpProxy(host.port, { tap: () => wire.connection() });
  admin = createNodeClient({ url: host.wsUrl, token: ADMIN_TOKEN });
});
afterAll(async () => {
  await admin?.close();
  await proxy?.stop();
  await host?.dispose();
});

/** Every page of the log, to compare followers against what was committed. */
async function committedLog(sessionId: string): Promise<SessionEvent[]> {
  const all: SessionEvent[] = [];
  for (;;) {
    const page = await admin.page({ sessionId, afterSeq: all.length, limit: 1000 });
    all.push(...(page.events as SessionEvent[]));
    if (!page.hasMore) return all;
  }
}

describe("followers through a proxy that cuts every connection at random", () => {
  it(`${FOLLOWERS} SDK followers and the CLI each see exactly 1..${TOTAL} across ${CUTS} cuts`, async () => {
    const sessionId = "cuts";
    await admin.create({ sessionId });
    const url = `ws://127.0.0.1:${proxy.port}/api/remote.mux`;

    const clients: SessionmuxClient[] = [];
    const received: number[][] = [];
    const subs: Subscription[] = [];
    const failures: unknown[] = [];
    for (let i = 0; i < FOLLOWERS; i++) {
      const client = createNodeClient({ url, token: ADMIN_TOKEN, backoff: fastBackoff });
      clients.push(client);
      const seqs: number[] = [];
      received.push(seqs);
      subs.push(
        followSession(client, sessionId).subscribe({
          next: (u) => {
            if (u.kind === "events") for (const e of u.events) seqs.push(e.seq);
          },
          error: (e: unknown) => failures.push(e),
        }),
      );
    }
    const cli = startCliFollower(url, sessionId, ADMIN_TOKEN);
    try {
      const cutsDone = proxy.startRandomCuts({ minMs: 50, maxMs: 500, count: CUTS });
      // Appended straight to the store in small paced batches, so the stream overlaps the cuts
      // without waiting on one fsync per event.
      for (let i = 0; i < STREAMED; i += BATCH) {
        const batch = Array.from({ length: BATCH }, (_, j) => ({
          type: "assistant/delta" as const,
          data: { turnId: "cuts-turn", text: `d${i + j}` },
        }));
        const outcome = await host.store.append(sessionId, batch);
        expect(outcome.status).toBe("appended");
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      await cutsDone;
      await vi.waitFor(async () => expect((await admin.page({ sessionId, limit: 1 })).headSeq).toBe(TOTAL), {
        timeout: 120_000,
        interval: 200,
      });
      await vi.waitFor(() => expect(received.map((r) => r.length)).toEqual(received.map(() => TOTAL)), {
        timeout: 60_000,
        interval: 100,
      });
      await vi.waitFor(() => expect(cli.lines.length).toBeGreaterThanOrEqual(TOTAL), {
        timeout: 60_000,
        interval: 100,
      });
      expect(await cli.stop()).toBe(0);

      const expected = Array.from({ length: TOTAL }, (_, i) => i + 1);
      expect(failures).toEqual([]);
      for (const seqs of received) expect(seqs).toEqual(expected);
      const log = await committedLog(sessionId);
      expect(log.map((e) => e.seq)).toEqual(expected);
      // The CLI prints exactly the committed events, each once, in order, with keys in the fixed order.
      expect(cli.lines).toHaveLength(TOTAL);
      expect(cli.lines).toEqual(
        log.map((e) => JSON.stringify({ seq: e.seq, type: e.type, at: e.at, data: e.data })),
      );
      // The host's own promise, on the bytes it sent before the SDK's dedupe: every follow stream
      // of every connection (SDK and CLI) continued its afterSeq exactly.
      expect(wire.violations).toEqual([]);
      expect(wire.streams).toBeGreaterThan(FOLLOWERS + 1);
      expect(wire.events).toBeGreaterThanOrEqual((FOLLOWERS + 1) * TOTAL);
      expect(proxy.cuts).toBe(CUTS);
      // Far more connections than the 21 first ones: the followers really were cut and came back.
      expect(proxy.accepted).toBeGreaterThan(CUTS);
      console.info(`proxy accepted ${proxy.accepted} connections over ${proxy.cuts} cuts`);
    } finally {
      cli.child.kill("SIGKILL");
      for (const s of subs) s.unsubscribe();
      await Promise.all(clients.map((c) => c.close()));
    }
  }, 240_000);
});
