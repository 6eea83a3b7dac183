import type { Socket } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { afterEach, describe, expect, it } from "vitest";
import WebSocket from "ws";
import type { HostStore } from "../../../src/store/live-state-store.js";
import { ADMIN_TOKEN, startTestHost, type TestHost } from "../../support/host.js";
import { MuxPeer } from "../../support/mux-peer.js";
import { until } from "../../support/until.js";
import { withMembers } from "../../support/with-members.js";
import { attachmentOf, attachmentUnderWay, createSession } from "./mux-fixture.js";

/**
 * Which peers the heartbeat drops (protocol-v1 §2): one that answers no ping and shows no other
 * sign of life within two intervals. A frame counts as a sign, and so do bytes the kernel took
 * from the host's backlog (a slow reader reads its pongs late), and so does the host's own
 * holding back of the socket while its calls are busy (it reads no pong then).
 */

const MIB = 1024 * 1024;
let hosts: TestHost[] = [];
let peers: MuxPeer[] = [];
afterEach(async () => {
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

async function silentPeer(host: TestHost): Promise<MuxPeer> {
  const peer = await MuxPeer.connect(host.wsUrl, { token: ADMIN_TOKEN, autoPong: false });
  peers.push(peer);
  return peer;
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
    const peer = await MuxPeer.connect(host.wsUrl, { token: ADMIN_TOKEN });
    peers.push(peer);
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
  });

  it("keeps a reader that reads its backlog slowly and answers no ping: the kernel taking bytes is a sign of life", async () => {
    // The kernel takes the host's bytes in steps of up to a few MiB (it wakes a writer only once
    // much of its buffer is free): the interval must outlast one step at the reader's pace, even
    // on a loaded machine.
    const host = await started({ mux: { pingIntervalMs: 1_000 } });
    // stored before the peer connects: a silent peer kept waiting would be dropped for it
    const attachmentId = await attachmentOf(host, 48 * MIB);
    const peer = await silentPeer(host);
    const sessionId = await createSession(peer);
    // one chunk (64 KiB at most) every 5 ms: 36 MiB take more than two intervals, and a silent
    // peer is dropped at the second
    const socket = (peer.ws as unknown as { _socket: Socket })._socket;
    let read = 0;
    socket.on("data", (chunk: Buffer) => {
      read += chunk.length;
      socket.pause();
      setTimeout(() => socket.resume(), 5);
    });
    peer.send({
      type: "call",
      id: peer.nextId(),
      method: "session.attachment",
      params: { sessionId, attachmentId },
    });
    const outcome = await until(
      () => (peer.ws.readyState !== WebSocket.OPEN ? "dropped" : read >= 36 * MIB ? "reading" : undefined),
      30_000,
      "36 MiB read",
    );
    expect(outcome).toBe("reading");
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
