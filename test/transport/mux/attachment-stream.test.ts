import { describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../../support/host.js";
import { hostTeardown } from "../../support/host-teardown.js";
import type { MuxPeer } from "../../support/mux-peer.js";
import { until } from "../../support/until.js";
import { appendDeltas, connect, createSession, expectRange, sessionUpload } from "./mux-fixture.js";

const MIB = 1024 * 1024;

const { peers, keep } = hostTeardown<TestHost>();

const pattern = (n: number) => new Uint8Array(n).map((_, i) => (i * 7) % 253);

function attachmentCall(peer: MuxPeer, params: { sessionId: string; attachmentId: string }): number {
  const id = peer.nextId();
  peer.send({ type: "call", id, method: "session.attachment", params });
  return id;
}

describe("a session.attachment answer streamed from the store (protocol-v1 §4, §9)", () => {
  it("other frames of the socket wait behind it and arrive after it, each exactly once", async () => {
    const host = keep(await startTestHost({ mux: { sendHighWaterBytes: 64 * 1024 } }));
    const peer = await connect(host);
    peers.push(peer);
    const sessionId = await createSession(peer);
    const follow = peer.follow(sessionId);
    await peer.waitItem(follow, (item) => item.kind === "caughtUp");
    // under the test peer's 1 MiB binary limit: four stored chunks
    const bytes = pattern(MIB - 1024);
    const attachmentId = await host.store.putAttachment({ owner: "admin", name: "a", type: "x/y", bytes });

    // Not read meanwhile: the answers stall after a few chunks while the session takes commits.
    peer.pause();
    const ids = [
      attachmentCall(peer, { sessionId, attachmentId }),
      attachmentCall(peer, { sessionId, attachmentId }),
    ];
    const head = await appendDeltas(host, sessionId, 200, 5);
    peer.resume();

    const answers = await until(
      () => {
        const got = ids.map((id) => peer.of(id).find((f) => f.type === "result"));
        return got.every((f) => f !== undefined) ? got : undefined;
      },
      20_000,
      "both answers",
    );
    for (const answer of answers) {
      const value = answer?.value as { size: number; bytes: Uint8Array };
      expect(value.size).toBe(bytes.byteLength);
      expect(Buffer.from(value.bytes).equals(Buffer.from(bytes))).toBe(true);
    }
    await peer.waitSeq(follow, head);
    expect(peer.violations).toEqual([]);
    expectRange(peer.events(follow), 1, head);
  });

  it("a body deleted while it is sent cannot be completed: that socket closes 1011, others go on", async () => {
    const host = keep(await startTestHost({ mux: { sendHighWaterBytes: 64 * 1024 } }));
    const reader = await connect(host);
    const other = await connect(host);
    peers.push(reader, other);
    const sessionId = await createSession(other);
    const bytes = pattern(10 * MIB);
    const attachmentId = await sessionUpload(host, other, sessionId, bytes);

    reader.pause();
    const bytesOut = async () => (await host.metrics.bytesOut.get()).values[0]?.value ?? 0;
    const before = await bytesOut();
    attachmentCall(reader, { sessionId, attachmentId });
    // the head and the first chunks are on their way before the session goes
    await until(async () => (await bytesOut()) >= before + 256 * 1024, 10_000, "the first chunk sent");
    await other.call("session.delete", { sessionId });
    reader.resume();
    expect((await reader.closed).code).toBe(1011);
    expect(await other.call("session.models")).toHaveProperty("default");
  });
});
