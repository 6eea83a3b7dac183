import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, it, vi } from "vitest";
import { encodeFrame } from "../../../protocol/codec.js";
import type { HostStore } from "../../../src/store/live-state-store.js";
import { gate } from "../../support/gate.js";
import { ADMIN_TOKEN, ALICE_TOKEN, startTestHost, type TestHost } from "../../support/host.js";
import { hostTeardown } from "../../support/host-teardown.js";
import { capturedLogger } from "../../support/log-capture.js";
import { MuxPeer } from "../../support/mux-peer.js";
import { until } from "../../support/until.js";
import { withMembers } from "../../support/with-members.js";
import { connect, createSession, startHostWithHeldList } from "./mux-fixture.js";

/**
 * One mux socket's own rules (protocol-v1 §2–§4), on a real host and real sockets: what it refuses
 * before decoding, how `close` treats calls and unknown ids, which calls count as creations, and
 * what a socket that goes away leaves behind.
 */

const { peers, keep } = hostTeardown<TestHost>();

async function openStreams(host: TestHost): Promise<Record<string, number>> {
  const values = (await host.metrics.openStreams.get()).values;
  return Object.fromEntries(values.map((v) => [String(v.labels.method), v.value]));
}

describe("a mux connection", () => {
  it("refuses a text frame as text, even one whose bytes decode, and goes on serving the socket", async () => {
    const host = keep(await startTestHost());
    const peer = await connect(host);
    peers.push(peer);
    // "7" is MessagePack too (the integer 55): the refusal says why it was not decoded
    peer.sendRaw("7", false);
    const refused = await until(
      () => peer.frames.find((f) => f.type === "error" && f.id === undefined),
      5_000,
      "the refusal",
    );
    expect(refused.error).toMatchObject({
      code: "bad_frame",
      message: "frames must be binary MessagePack, not text",
    });
    expect(await peer.call("session.models")).toBeDefined();
  });

  it("refuses bytes that are not MessagePack with the decoder's reason, and goes on serving the socket", async () => {
    const host = keep(await startTestHost());
    const peer = await connect(host);
    peers.push(peer);
    peer.sendRaw(new Uint8Array([0xc1]));
    const refused = await until(
      () => peer.frames.find((f) => f.type === "error" && f.id === undefined),
      5_000,
      "the refusal",
    );
    expect(refused.error).toMatchObject({ code: "bad_frame", message: "reserved type byte 0xc1 at byte 0" });
    expect(await peer.call("session.models")).toBeDefined();
  });

  it("ignores a close naming a call in flight (its result still comes, no end); answers one naming nothing with end", async () => {
    const host = keep(await startTestHost());
    const peer = await connect(host);
    peers.push(peer);
    const id = peer.nextId();
    peer.send({ type: "call", id, method: "session.models" });
    peer.close(id);
    const answer = await until(() => peer.of(id).find((f) => f.type === "result"), 5_000, "the result");
    expect(answer.value).toBeDefined();
    peer.close(9_999);
    const ended = await peer.waitTerminal(9_999);
    expect(ended).toMatchObject({ type: "end", id: 9_999 });
    await sleep(50);
    expect(peer.of(id).map((f) => f.type)).toEqual(["result"]);
  });

  it("frees an id once its call is answered or refused overloaded, and once its stream ended (§3: unique among those in flight)", async () => {
    const { host, listing } = await startHostWithHeldList({ maxCallsInFlight: 1, maxQueuedCalls: 1 });
    keep(host);
    const peer = await connect(host);
    peers.push(peer);
    const answer = (id: number) =>
      until(() => peer.of(id).find((f) => f.type === "result" || f.type === "error"), 5_000, `answer ${id}`);
    // the id sent again as a call: answered on it, not refused duplicate_id (an error without id)
    const reuse = async (id: number) => {
      const before = peer.of(id).length;
      peer.send({ type: "call", id, method: "session.models" });
      await until(() => peer.of(id)[before] ?? peer.unidentifiedErrors()[0], 5_000, `answer to ${id} reused`);
      expect(peer.unidentifiedErrors()).toEqual([]);
      expect(peer.of(id)[before]?.type).toBe("result");
    };

    peer.send({ type: "call", id: 101, method: "session.models" });
    expect((await answer(101)).type).toBe("result");
    await reuse(101);

    // one call runs, one waits, the third is refused
    peer.send({ type: "call", id: 102, method: "session.list", params: {} });
    peer.send({ type: "call", id: 103, method: "session.models" });
    peer.send({ type: "call", id: 104, method: "session.models" });
    expect((await answer(104)).error?.code).toBe("overloaded");
    listing.open();
    await answer(102);
    await answer(103);
    await reuse(104);

    // a stream the client closed, and one the host ended
    const sessionId = await createSession(peer);
    peer.open("session.follow", { sessionId }, 105);
    await peer.waitItem(105, (item) => item.kind === "caughtUp");
    peer.close(105);
    expect((await peer.waitTerminal(105)).type).toBe("end");
    await reuse(105);
    peer.open("session.follow", { sessionId, afterSeq: 1_000 }, 106);
    expect((await peer.waitTerminal(106)).error?.code).toBe("cursor_ahead");
    await reuse(106);
  });

  it("counts a fork as a creation of the caller's, and a call that creates nothing not at all", async () => {
    const host = keep(
      await startTestHost({ principals: { sessionCreateBurst: 2, sessionCreatePerSecond: 0.001 } }),
    );
    const alice = await connect(host, { token: ALICE_TOKEN });
    peers.push(alice);
    for (let i = 0; i < 5; i++) await alice.call("session.models");
    const sourceId = await createSession(alice);
    await alice.call("session.fork", { sourceId });
    const limited = await alice.callError("session.fork", { sourceId });
    expect(limited.code).toBe("rate_limited");
    expect((await alice.callError("session.create", {})).code).toBe("rate_limited");
  });

  it("answers a call that failed unexpectedly internal_error, logs it with the call and principal, and serves the next", async () => {
    const log = capturedLogger();
    const host = keep(
      await startTestHost({
        logger: log.logger,
        storeView: (store: HostStore) =>
          withMembers(store, {
            list: async () => {
              throw new Error("the disk went away");
            },
          }),
      }),
    );
    const alice = await connect(host, { token: ALICE_TOKEN });
    peers.push(alice);
    const failed = await alice.callError("session.list", {});
    expect(failed.code).toBe("internal_error");
    expect(failed.message).not.toContain("the disk went away");
    const logged = log.lines.filter((line) => line.msg === "mux internal error");
    expect(logged).toHaveLength(1);
    expect(logged[0]).toMatchObject({
      context: "session.list",
      principal: "alice",
      err: { message: "the disk went away" },
    });
    // an expected refusal is answered, not logged
    expect((await alice.callError("session.rename", { sessionId: "nope", title: "x" })).code).toBe(
      "session_not_found",
    );
    expect(log.lines.filter((line) => line.msg === "mux internal error")).toHaveLength(1);
    expect(await alice.call("session.models")).toBeDefined();
  });

  it("a socket that goes away stops its streams: none is left open, and the session's commits reach nobody", async () => {
    const host = keep(await startTestHost());
    const owner = await connect(host);
    peers.push(owner);
    const sessionId = await createSession(owner);
    const leaving = await connect(host);
    const follow = leaving.follow(sessionId);
    await leaving.waitItem(follow, (item) => item.kind === "caughtUp");
    const control = leaving.open("session.control", {});
    await leaving.waitItem(control, (item) => item.kind === "baseline");
    expect(await openStreams(host)).toEqual({ "session.follow": 1, "session.control": 1 });
    leaving.ws.terminate();
    await vi.waitFor(async () =>
      expect(await openStreams(host)).toEqual({ "session.follow": 0, "session.control": 0 }),
    );
    // the owner's own calls go on; nothing is sent to the socket that left
    await owner.call("session.rename", { sessionId, title: "after" });
  });

  it("counts every frame it reads and its bytes, a refused one too", async () => {
    const host = keep(await startTestHost());
    const peer = await connect(host);
    peers.push(peer);
    const counted = async (): Promise<[number, number]> => [
      (await host.metrics.framesIn.get()).values[0]?.value ?? 0,
      (await host.metrics.bytesIn.get()).values[0]?.value ?? 0,
    ];
    const [frames, bytes] = await counted();
    const call = encodeFrame({ type: "call", id: 1, method: "session.models" });
    peer.sendRaw(call);
    peer.sendRaw("not binary", false);
    await until(
      () => peer.frames.find((f) => f.type === "error" && f.id === undefined),
      5_000,
      "the refusal",
    );
    await until(() => peer.of(1).length > 0, 5_000, "the answer");
    expect(await counted()).toEqual([frames + 2, bytes + call.length + "not binary".length]);
  });

  it("calls still waiting for a slot when the socket goes away never run", async () => {
    const listing = gate();
    let created = 0;
    const host = keep(
      await startTestHost({
        mux: { maxCallsInFlight: 1 },
        storeView: (store: HostStore) =>
          withMembers(store, {
            list: async (...args: Parameters<HostStore["list"]>) => {
              await listing.promise;
              return store.list(...args);
            },
            create: async (...args: Parameters<HostStore["create"]>) => {
              created++;
              return store.create(...args);
            },
          }),
      }),
    );
    const leaving = await MuxPeer.connect(host.wsUrl, { token: ADMIN_TOKEN });
    // the list holds the only slot; the creations wait behind it
    leaving.send({ type: "call", id: leaving.nextId(), method: "session.list", params: {} });
    for (let i = 0; i < 3; i++)
      leaving.send({ type: "call", id: leaving.nextId(), method: "session.create", params: {} });
    const connections = async () => (await host.metrics.connections.get()).values[0]?.value ?? 0;
    await until(
      async () => (await host.metrics.framesIn.get()).values[0]?.value === 4,
      5_000,
      "the calls read",
    );
    leaving.ws.terminate();
    await until(async () => (await connections()) === 0, 5_000, "the socket let go");
    listing.open();
    // the slot is free again: a waiting call would start within a turn or two
    await sleep(50);
    expect(created).toBe(0);
    const peer = await connect(host);
    peers.push(peer);
    await createSession(peer);
    expect(created).toBe(1);
  });

  it("a host shutting down ends every open stream with host_shutting_down on its id, a call in flight aside, then closes the socket 1001", async () => {
    const listing = gate();
    let listed = 0;
    const host = await startTestHost({
      storeView: (store: HostStore) =>
        withMembers(store, {
          list: async (...args: Parameters<HostStore["list"]>) => {
            listed++;
            await listing.promise;
            return store.list(...args);
          },
        }),
    });
    let disposed: Promise<void> | undefined;
    try {
      const peer = await connect(host);
      const sessionId = await createSession(peer);
      const follow = peer.follow(sessionId);
      await peer.waitItem(follow, (item) => item.kind === "caughtUp");
      const control = peer.open("session.control", {});
      await peer.waitItem(control, (item) => item.kind === "baseline");
      // a call is in flight too: it has no stream to end
      peer.send({ type: "call", id: peer.nextId(), method: "session.list", params: {} });
      await until(() => listed === 1, 5_000, "the call in flight");
      disposed = host.dispose();
      for (const id of [follow, control])
        expect((await peer.waitTerminal(id)).error).toMatchObject({
          code: "host_shutting_down",
          message: "the host is shutting down; reconnect later",
        });
      expect((await peer.closed).code).toBe(1001);
    } finally {
      listing.open();
      await (disposed ?? host.dispose());
    }
  });
});
