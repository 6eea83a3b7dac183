import { afterEach, describe, expect, it, vi } from "vitest";
import { decodeFrame } from "../../protocol/codec.js";
import { Limits } from "../../protocol/limits.js";
import { controlMirror } from "../../src/client/control-mirror.js";
import type { ControlMirror } from "../../src/client/control-mirror-reducer.js";
import { browserLikeClient } from "../support/browser-like-client.js";
import { ADMIN_TOKEN, startTestHost, type TestHost } from "../support/host.js";
import { startTcpProxy } from "../support/tcp-proxy.js";
import { until } from "../support/until.js";
import { hostMessageTap } from "../support/ws-frame-reader.js";
import { peerFixture } from "./peer-fixture.js";

const KIB = 1024;
/** An item's frame around its value: the map header, `type`, `id` and the `value` key. */
const ITEM_FRAME_BYTES = 32;
const SESSIONS = 80;
const ADMIN = { name: "admin", admin: true };

const { cleanups, track } = peerFixture();
let host: TestHost | undefined;
afterEach(async () => {
  await host?.dispose();
  host = undefined;
});

describe("session.control over a slow link (protocol-v1 §5: a baseline in parts of at most 64 KiB)", () => {
  it("a browser-like client takes a 1 MiB baseline over a 192 KiB/s link on one socket and shows it only whole", async () => {
    host = await startTestHost();
    // 80 sessions, each waiting on a 12 KB question: a baseline of about 1 MiB
    for (let i = 0; i < SESSIONS; i++) {
      const sessionId = `asks-${i}`;
      await host.host.call(ADMIN, "session.create", { sessionId });
      await host.host.call(ADMIN, "session.prompt", {
        sessionId,
        text: `/ask ${i} ${"y".repeat(12_000)}`,
        clientMessageId: `c${i}`,
      });
    }
    await until(() => host!.host.live.interactions().length === SESSIONS, 30_000, "every question asked");
    const baselineMessages: number[] = [];
    const proxy = await startTcpProxy(host.port, {
      hostBytesPerSecond: 192 * KIB,
      tap: hostMessageTap((message) => {
        const frame = decodeFrame(message, { maxValues: 2 ** 25 }) as { value?: { kind?: string } };
        if (frame.value?.kind === "baseline") baselineMessages.push(message.length);
      }),
    });
    cleanups.push(() => proxy.stop());
    const client = track(
      browserLikeClient(host.wsUrl.replace(`:${host.port}`, `:${proxy.port}`), ADMIN_TOKEN),
    );
    const mirrors: ControlMirror[] = [];
    const failures: unknown[] = [];
    const sub = controlMirror(client).subscribe({
      next: (m) => mirrors.push(m),
      error: (e) => failures.push(e),
    });
    cleanups.push(() => sub.unsubscribe());
    const whole = () => mirrors.some((m) => !m.stale && Object.keys(m.interactions).length === SESSIONS);
    // until the whole baseline shows, or until the first sign it will not (a failure, a second socket)
    await vi.waitFor(() => expect(whole() || failures.length > 0 || proxy.accepted > 1).toBe(true), {
      timeout: 60_000,
      interval: 100,
    });
    expect(failures).toEqual([]);
    expect(proxy.accepted).toBe(1);
    expect(whole()).toBe(true);
    // every mirror a baseline produced holds all of it: none showed a part as the state
    const applied = mirrors.filter((m) => m.lastChange?.kind === "baseline");
    expect(applied).toHaveLength(1);
    expect(Object.keys(applied[0]!.projections)).toHaveLength(SESSIONS);
    expect(Object.keys(applied[0]!.agents)).toHaveLength(SESSIONS);
    // it crossed as several messages, none over the bound
    expect(baselineMessages.length).toBeGreaterThan(10);
    for (const bytes of baselineMessages)
      expect(bytes).toBeLessThanOrEqual(Limits.streamItemBytes + ITEM_FRAME_BYTES);

    // deltas apply on top of the whole baseline: an answer takes its question away
    const [first] = Object.values(applied[0]!.interactions);
    await client.call("session.respond", { interactionId: first!.interactionId, response: { answer: "a" } });
    await vi.waitFor(() => expect(Object.keys(mirrors.at(-1)!.interactions)).toHaveLength(SESSIONS - 1), {
      timeout: 30_000,
      interval: 100,
    });
    expect(proxy.accepted).toBe(1);
    expect(proxy.cuts).toBe(0);
  }, 120_000);
});
