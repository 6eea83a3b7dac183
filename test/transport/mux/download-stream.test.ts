import { describe, expect, it } from "vitest";
import { DOWNLOAD_PIECE_BYTES } from "../../../src/transport/mux/download-stream.js";
import { ALICE_TOKEN, startTestHost, type TestHost } from "../../support/host.js";
import { hostTeardown } from "../../support/host-teardown.js";
import type { MuxPeer } from "../../support/mux-peer.js";
import { until } from "../../support/until.js";
import { appendDeltas, connect, createSession, expectRange, sessionUpload } from "./mux-fixture.js";

const KIB = 1024;
const MIB = 1024 * KIB;

const { peers, keep } = hostTeardown<TestHost>();

const pattern = (n: number) => new Uint8Array(n).map((_, i) => (i * 7) % 253);

type Item =
  | { kind: "head"; name: string; type: string; size: number }
  | { kind: "bytes"; offset: number; bytes: Uint8Array };

async function readyHost(): Promise<{ host: TestHost; peer: MuxPeer; sessionId: string }> {
  const host = keep(await startTestHost());
  const peer = await connect(host);
  peers.push(peer);
  return { host, peer, sessionId: await createSession(peer) };
}

/** The bytes items' pieces in order, checked contiguous from `from`. */
function piecesFrom(items: readonly Item[], from: number): Buffer {
  const pieces = items.filter((item) => item.kind === "bytes");
  let at = from;
  for (const piece of pieces) {
    expect(piece.offset).toBe(at);
    expect(piece.bytes.byteLength).toBeGreaterThan(0);
    expect(piece.bytes.byteLength).toBeLessThanOrEqual(DOWNLOAD_PIECE_BYTES);
    at += piece.bytes.byteLength;
  }
  return Buffer.concat(pieces.map((piece) => piece.bytes));
}

describe("session.download: an attachment as a stream of pieces (protocol-v1 §5)", () => {
  it("is its head, then every byte once, in order, in pieces of at most 64 KiB, then end; from an offset it starts there", async () => {
    const { host, peer, sessionId } = await readyHost();
    // three stored chunks of 256 KiB, the last one short
    const bytes = pattern(600 * KIB + 123);
    const attachmentId = await host.store.putAttachment({
      owner: "admin",
      name: "a.bin",
      type: "x/y",
      bytes,
    });

    const whole = peer.open("session.download", { sessionId, attachmentId });
    expect((await peer.waitTerminal(whole)).type).toBe("end");
    const items = peer.items<Item>(whole);
    expect(items[0]).toEqual({ kind: "head", name: "a.bin", type: "x/y", size: bytes.byteLength });
    expect(items.filter((item) => item.kind === "head")).toHaveLength(1);
    expect(piecesFrom(items.slice(1), 0).equals(Buffer.from(bytes))).toBe(true);
    // the stored chunks are cut into pieces: 10 of 64 KiB, the stored chunks' rests, the tail
    expect(items.length - 1).toBe(
      Math.ceil((256 * KIB) / DOWNLOAD_PIECE_BYTES) * 2 + Math.ceil((88 * KIB + 123) / DOWNLOAD_PIECE_BYTES),
    );

    // an offset inside a piece of a stored chunk past the first
    const offset = 300_000;
    const tail = peer.open("session.download", { sessionId, attachmentId, offset });
    expect((await peer.waitTerminal(tail)).type).toBe("end");
    const tailItems = peer.items<Item>(tail);
    expect(tailItems[0]).toMatchObject({ kind: "head", size: bytes.byteLength });
    expect(piecesFrom(tailItems.slice(1), offset).equals(Buffer.from(bytes.subarray(offset)))).toBe(true);

    // at the end: the head alone; past it: refused, naming the field
    const atEnd = peer.open("session.download", { sessionId, attachmentId, offset: bytes.byteLength });
    expect((await peer.waitTerminal(atEnd)).type).toBe("end");
    expect(peer.items<Item>(atEnd)).toEqual([
      { kind: "head", name: "a.bin", type: "x/y", size: bytes.byteLength },
    ]);
    const past = peer.open("session.download", { sessionId, attachmentId, offset: bytes.byteLength + 1 });
    expect(await peer.waitTerminal(past)).toMatchObject({
      type: "error",
      error: { code: "bad_request", data: { field: "/offset", size: bytes.byteLength } },
    });
    expect(peer.items(past)).toEqual([]);
  });

  it("an empty attachment is its head and end", async () => {
    const { host, peer, sessionId } = await readyHost();
    const attachmentId = await host.store.putAttachment({
      owner: "admin",
      name: "e",
      type: "x/y",
      bytes: new Uint8Array(0),
    });
    const id = peer.open("session.download", { sessionId, attachmentId });
    expect((await peer.waitTerminal(id)).type).toBe("end");
    expect(peer.items<Item>(id)).toEqual([{ kind: "head", name: "e", type: "x/y", size: 0 }]);
  });

  it("refuses what the caller may not read as attachment_not_found, and bad params as bad_request", async () => {
    const host = keep(await startTestHost());
    const alice = await connect(host, { token: ALICE_TOKEN });
    peers.push(alice);
    const sessionId = await createSession(alice);
    const mine = await host.store.putAttachment({
      owner: "alice",
      name: "m",
      type: "x/y",
      bytes: pattern(10),
    });
    const theirs = await host.store.putAttachment({
      owner: "bob",
      name: "b",
      type: "x/y",
      bytes: pattern(10),
    });
    for (const attachmentId of [theirs, "no-such-upload"]) {
      const id = alice.open("session.download", { sessionId, attachmentId });
      expect(await alice.waitTerminal(id)).toMatchObject({
        type: "error",
        error: { code: "attachment_not_found" },
      });
      expect(alice.items(id)).toEqual([]);
    }
    const noSession = alice.open("session.download", { sessionId: "nope", attachmentId: mine });
    expect(await alice.waitTerminal(noSession)).toMatchObject({
      type: "error",
      error: { code: "session_not_found" },
    });
    for (const params of [
      { sessionId, attachmentId: mine, offset: -1 },
      { sessionId, attachmentId: mine, extra: 1 },
    ]) {
      const id = alice.open("session.download", params);
      expect(await alice.waitTerminal(id)).toMatchObject({ type: "error", error: { code: "bad_request" } });
    }
    const own = alice.open("session.download", { sessionId, attachmentId: mine });
    expect((await alice.waitTerminal(own)).type).toBe("end");
  });

  it("holds no other stream back: a follow's live events pass a download its reader stopped reading", async () => {
    const { host, peer, sessionId } = await readyHost();
    const follow = peer.follow(sessionId);
    await peer.waitItem(follow, (item) => item.kind === "caughtUp");
    // more than the kernel's buffers of a paused socket take on loopback
    const bytes = pattern(40 * MIB);
    const attachmentId = await host.store.putAttachment({ owner: "admin", name: "a", type: "x/y", bytes });

    peer.pause();
    const download = peer.open("session.download", { sessionId, attachmentId });
    // the download stalls once the kernel holds what it can and the host its mark
    const bytesOut = async () => (await host.metrics.bytesOut.get()).values[0]?.value ?? 0;
    let last = -1;
    for (let polls = 0; polls < 100; polls++) {
      const now = await bytesOut();
      if (now === last && now > 0) break;
      last = now;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    expect(last).toBeLessThan(bytes.byteLength);
    const head = await appendDeltas(host, sessionId, 50, 5);
    peer.resume();
    await peer.waitSeq(follow, head);
    expect((await peer.waitTerminal(download, 60_000)).type).toBe("end");

    // the events came in between the download's pieces, not after its last one
    const order = peer.frames.map((frame) => frame.id);
    expect(order.lastIndexOf(follow)).toBeLessThan(order.lastIndexOf(download));
    expectRange(peer.events(follow), 1, head);
    expect(piecesFrom(peer.items<Item>(download).slice(1), 0).equals(Buffer.from(bytes))).toBe(true);
    expect(peer.violations).toEqual([]);
  });

  it("a body deleted while it is read ends that stream with attachment_not_found; the socket and its other streams go on", async () => {
    const { host, peer, sessionId } = await readyHost();
    const other = await connect(host);
    peers.push(other);
    const bytes = pattern(8 * MIB);
    const attachmentId = await sessionUpload(host, other, sessionId, bytes);
    const keptSession = await createSession(peer);
    const follow = peer.follow(keptSession);
    await peer.waitItem(follow, (item) => item.kind === "caughtUp");

    peer.pause();
    const download = peer.open("session.download", { sessionId, attachmentId });
    const bytesOut = async () => (await host.metrics.bytesOut.get()).values[0]?.value ?? 0;
    const before = await bytesOut();
    await until(async () => (await bytesOut()) >= before + 256 * KIB, 10_000, "the first pieces sent");
    await other.call("session.delete", { sessionId });
    peer.resume();

    expect(await peer.waitTerminal(download, 30_000)).toMatchObject({
      type: "error",
      error: { code: "attachment_not_found" },
    });
    const received = peer.items<Item>(download).filter((item) => item.kind === "bytes").length;
    expect(received).toBeLessThan(bytes.byteLength / DOWNLOAD_PIECE_BYTES);
    // the socket is open and its follow still live
    const head = await appendDeltas(host, keptSession, 3, 1);
    await peer.waitSeq(follow, head);
    expect(peer.violations).toEqual([]);
  });

  it("closed by the reader, it ends and sends no more pieces", async () => {
    const { host, peer, sessionId } = await readyHost();
    const attachmentId = await host.store.putAttachment({
      owner: "admin",
      name: "a",
      type: "x/y",
      bytes: pattern(8 * MIB),
    });
    peer.pause();
    const download = peer.open("session.download", { sessionId, attachmentId });
    peer.close(download);
    peer.resume();
    expect((await peer.waitTerminal(download, 30_000)).type).toBe("end");
    const endAt = peer.of(download).length;
    // a call after it is answered once everything before it arrived: nothing more of the download
    await peer.call("session.models", {});
    expect(peer.of(download)).toHaveLength(endAt);
    const received = peer.items<Item>(download).filter((item) => item.kind === "bytes").length;
    expect(received).toBeLessThan((8 * MIB) / DOWNLOAD_PIECE_BYTES);
  });
});
