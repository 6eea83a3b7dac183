import { setTimeout as sleep } from "node:timers/promises";
import { afterEach, describe, expect, it } from "vitest";
import WebSocket from "ws";
import type { HostStore } from "../../../src/store/live-state-store.js";
import { ADMIN_TOKEN, startTestHost, type TestHost } from "../../support/host.js";
import { MuxPeer } from "../../support/mux-peer.js";
import { until } from "../../support/until.js";
import { withMembers } from "../../support/with-members.js";
import { attachmentOf, attachmentUnderWay, createSession } from "./mux-fixture.js";
import { type SlowReader, slowReader } from "./slow-reader.js";

/**
 * Which peers the heartbeat drops (protocol-v1 §2), on real sockets: one owed nothing that answers
 * no ping and shows no other sign of life within two intervals; one the host holds a backlog for
 * that shows none for the grace intervals in a row. A frame counts as a sign, and so do bytes the
 * kernel took from the host's backlog (a slow reader reads its pongs late), and so does the
 * host's own holding back of the socket while its calls are busy (it reads no pong then). The
 * rule tick by tick is in `heartbeat-rule.test.ts`.
 */

const MIB = 1024 * 1024;
/**
 * The test peers' decoder and `ws` limits: above the largest message the host sends them here,
 * an attachment's result (the attachment plus a small head), so one that arrives whole is read.
 */
const PEER_LIMIT = 64 * MIB;
let hosts: TestHost[] = [];
let peers: MuxPeer[] = [];
const readers: SlowReader[] = [];
afterEach(async () => {
  for (const reader of readers.splice(0)) reader.stop();
  for (const peer of peers.splice(0)) await peer.disconnect();
  for (const host of hosts.splice(0)) await host.dispose();
  hosts = [];
  peers = [];
});

async function started(options: Parameters<typeof startTestHost>[0]): Promise<TestHost> {
  const host = await startTestHost(options);
  hosts.push(host);
  return host;
}

async function connected(host: TestHost, autoPong = true): Promise<MuxPeer> {
  const peer = await MuxPeer.connect(host.wsUrl, {
    token: ADMIN_TOKEN,
    autoPong,
    decodeLimits: { maxBinBytes: PEER_LIMIT },
    maxPayload: PEER_LIMIT,
  });
  peers.push(peer);
  return peer;
}

function silentPeer(host: TestHost): Promise<MuxPeer> {
  return connected(host, false);
}

function reading(peer: MuxPeer, everyMs: number): SlowReader {
  const reader = slowReader(peer, everyMs);
  readers.push(reader);
  return reader;
}

/**
 * Quiet intervals in a row allowed to a peer owed a backlog in the tests of slow readers: the
 * reader's pace is a timer of this process, which a loaded machine stretches, while the kernel's
 * buffers it must read through stay MiBs.
 */
const GRACE = 30;

/** A reader of a few MB/s, one chunk every 10 ms. */
function slow(peer: MuxPeer): SlowReader {
  return reading(peer, 10);
}

async function heartbeatDrops(host: TestHost, reason: "silent" | "stalled"): Promise<number> {
  const counter = await host.metrics.heartbeatDrops.get();
  return counter.values.find((v) => v.labels.reason === reason)?.value ?? 0;
}

describe("mux heartbeat: signs of life", () => {
  it("keeps a peer that never answers a ping but keeps sending frames", async () => {
    // a slower clock than the suite's, so a stalled test process cannot pass for a silent peer
    const host = await started({ mux: { pingIntervalMs: 200 } });
    const peer = await silentPeer(host);
    // seven ping intervals of calls: a silent peer is dropped within two
    for (let i = 0; i < 70; i++) {
      peer.send({ type: "call", id: peer.nextId(), method: "session.models" });
      await sleep(20);
    }
    expect(peer.ws.readyState).toBe(WebSocket.OPEN);
    expect(await peer.call("session.models")).toHaveProperty("models");
  });

  it("drops a peer that stopped reading with answers owed to it: a backlog the kernel takes nothing from is no sign of life", async () => {
    const host = await started({ mux: { pingIntervalMs: 200 } });
    // it answers pings until it stops reading; the call it sends then is its last sign of life
    const peer = await connected(host);
    const sessionId = await createSession(peer);
    const attachmentId = await attachmentOf(host, 32 * MIB);
    peer.pause();
    await attachmentUnderWay(host, peer, sessionId, attachmentId);
    // one more frame once the answer is under way: the host, its backlog past the mark, stops
    // reading the socket, and a socket it does not read is still dropped when the backlog is the
    // peer's doing
    peer.send({ type: "call", id: peer.nextId(), method: "session.models" });
    // the peer does not read, so it cannot hear it: the host's count of sockets says so
    const connections = async () => (await host.metrics.connections.get()).values[0]?.value ?? 0;
    await until(async () => (await connections()) === 0, 10_000, "the stalled peer dropped");
    expect(await heartbeatDrops(host, "stalled")).toBe(1);
  });

  it("keeps a reader that reads its backlog slowly and answers no ping: the kernel taking bytes is a sign of life", async () => {
    // The kernel takes the host's bytes in steps of up to a few MiB (it wakes a writer only once
    // much of its buffer is free): the interval must outlast one step at the reader's pace, even
    // on a loaded machine. No grace: a tick that sees no step drops the peer.
    const host = await started({ mux: { pingIntervalMs: 1_000, backlogGraceIntervals: 1 } });
    // stored before the peer connects: a silent peer kept waiting would be dropped for it
    const attachmentId = await attachmentOf(host, 48 * MIB);
    const peer = await silentPeer(host);
    const sessionId = await createSession(peer);
    // one chunk (64 KiB at most) every 5 ms: 36 MiB take more than two intervals, and a silent
    // peer is dropped at the second
    const reader = reading(peer, 5);
    peer.send({
      type: "call",
      id: peer.nextId(),
      method: "session.attachment",
      params: { sessionId, attachmentId },
    });
    const outcome = await until(
      () =>
        peer.ws.readyState !== WebSocket.OPEN ? "dropped" : reader.read >= 36 * MIB ? "reading" : undefined,
      30_000,
      "36 MiB read",
    );
    reader.stop();
    expect(outcome).toBe("reading");
  });

  it("keeps a slow reader the host stopped reading for its backlog until its answer is read, through intervals with no sign of life", async () => {
    const host = await started({ mux: { pingIntervalMs: 100, backlogGraceIntervals: GRACE } });
    const attachmentId = await attachmentOf(host, 16 * MIB);
    const peer = await connected(host);
    const sessionId = await createSession(peer);
    let pings = 0;
    peer.ws.on("ping", () => {
      pings++;
    });
    // A link of a few MB/s: one chunk every 10 ms. The kernel takes the host's bytes in steps of
    // about a third of its send buffer (1.5 MiB on loopback), one every few intervals, and once
    // the backlog is gone its buffers hold MiBs more, ahead of every later ping.
    slow(peer);
    const id = await attachmentUnderWay(host, peer, sessionId, attachmentId);
    // one more frame while the backlog is past the mark: the host stops reading the socket, and
    // hears no pong until the backlog is under the mark again
    const models = peer.nextId();
    peer.send({ type: "call", id: models, method: "session.models" });
    const outcome = await until(
      () =>
        peer.ws.readyState !== WebSocket.OPEN
          ? "dropped"
          : peer.of(id).some((f) => f.type === "result")
            ? "answered"
            : undefined,
      60_000,
      "the answer read",
    );
    expect(outcome).toBe("answered");
    const answer = peer.of(id).find((f) => f.type === "result")?.value as { bytes: Uint8Array };
    expect(answer.bytes.length).toBe(16 * MIB);
    // several intervals went by while it read
    expect(pings).toBeGreaterThanOrEqual(5);
    await until(
      () => peer.of(models).some((f) => f.type === "result"),
      10_000,
      "the call sent meanwhile answered",
    );
    expect(peer.ws.readyState).toBe(WebSocket.OPEN);
    expect(await heartbeatDrops(host, "stalled")).toBe(0);
  });

  it("drops a slow reader that stops reading with its answer owed once the grace intervals pass", async () => {
    const host = await started({ mux: { pingIntervalMs: 100, backlogGraceIntervals: GRACE } });
    const attachmentId = await attachmentOf(host, 16 * MIB);
    const peer = await connected(host);
    const sessionId = await createSession(peer);
    const reader = slow(peer);
    const id = await attachmentUnderWay(host, peer, sessionId, attachmentId);
    peer.send({ type: "call", id: peer.nextId(), method: "session.models" });
    const outcome = await until(
      () =>
        peer.ws.readyState !== WebSocket.OPEN ? "dropped" : reader.read >= 4 * MIB ? "reading" : undefined,
      30_000,
      "4 MiB read",
    );
    expect(outcome).toBe("reading");
    // it reads nothing more, ever: the rest of its answer never arrives
    reader.stop();
    const connections = async () => (await host.metrics.connections.get()).values[0]?.value ?? 0;
    await until(async () => (await connections()) === 0, 30_000, "the stalled reader dropped");
    expect(await heartbeatDrops(host, "stalled")).toBe(1);
    expect(peer.of(id).some((f) => f.type === "result")).toBe(false);
  });

  it("drops a silent peer owed nothing at its first quiet interval, one ping unanswered, whatever the grace", async () => {
    const host = await started({ mux: { pingIntervalMs: 100, backlogGraceIntervals: GRACE } });
    const peer = await silentPeer(host);
    let pings = 0;
    peer.ws.on("ping", () => {
      pings++;
    });
    await until(
      () => (peer.ws.readyState === WebSocket.CLOSED ? true : undefined),
      10_000,
      "the silent peer dropped",
    );
    expect(pings).toBe(1);
    expect(await heartbeatDrops(host, "silent")).toBe(1);
  });

  it("keeps a peer whose calls keep the host from reading its socket, pongs and all", async () => {
    let busy = 0;
    const host = await started({
      mux: { pingIntervalMs: 50, maxCallsInFlight: 1 },
      // each list takes three ping intervals: the calls behind it wait, and the socket is not read
      storeView: (store: HostStore) =>
        withMembers(store, {
          list: async (...args: Parameters<HostStore["list"]>) => {
            busy++;
            await sleep(150);
            return store.list(...args);
          },
        }),
    });
    const peer = await MuxPeer.connect(host.wsUrl, { token: ADMIN_TOKEN });
    peers.push(peer);
    const ids = Array.from({ length: 4 }, () => peer.nextId());
    for (const id of ids) peer.send({ type: "call", id, method: "session.list", params: {} });
    await until(
      () => ids.every((id) => peer.of(id).some((f) => f.type === "result")),
      10_000,
      "every list answered",
    );
    expect(busy).toBe(4);
    expect(peer.ws.readyState).toBe(WebSocket.OPEN);
  });
});
