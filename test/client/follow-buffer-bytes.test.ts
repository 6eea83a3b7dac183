import { describe, expect, it, vi } from "vitest";
import { createNodeClient } from "../../src/client/node.js";
import type { PeerConnection } from "./fake-peer.js";
import { peerFixture } from "./peer-fixture.js";

const { peer, track } = peerFixture();
const MIB = 1024 * 1024;

/** A host that answers `session.follow` with `items` events items, each one event of `chars` characters. */
async function hostSending(items: number, chars: number) {
  const serve = (conn: PeerConnection, f: { id: number }) => {
    const item = (value: unknown) => conn.send({ type: "item", id: f.id, value });
    item({ kind: "opened", epoch: "E1", headSeq: items });
    for (let seq = 1; seq <= items; seq++) {
      const event = { seq, at: 1, type: "session/renamed", data: { title: "x".repeat(chars) } };
      item({ kind: "events", events: [event] });
    }
    item({ kind: "caughtUp", seq: items });
    conn.send({ type: "end", id: f.id });
  };
  // answered after the stream's items, so once it is, the client has taken every one of them
  return peer({ onOpen: serve, onCall: () => ({ sessions: [] }) });
}

describe("a follow read with for await buffers what its loop has not read, bounded by weight as well as by count", () => {
  it("a loop that falls maxBufferedBytes behind ends with slow_consumer, though its values are few", async () => {
    const p = await hostSending(3, 512 * 1024);
    const client = track(createNodeClient({ url: p.url, token: "t" }));
    const loop = client.follow("s", { maxBufferedBytes: MIB })[Symbol.asyncIterator]();
    await vi.waitFor(() => expect(p.received("open")).toHaveLength(1));
    await client.call("session.list", {});
    expect(await loop.next()).toMatchObject({ value: { kind: "opened" } });
    expect(await loop.next()).toMatchObject({ value: { kind: "events" } });
    // the second events item would have held more than 1 MiB of events behind the loop
    await expect(loop.next()).rejects.toMatchObject({
      code: "slow_consumer",
      data: { maxBuffered: 10_000, maxBufferedBytes: MIB },
    });
    expect(await loop.next()).toEqual({ value: undefined, done: true });
    // the stream was closed when the loop ended
    await vi.waitFor(() => expect(p.received("close")).toHaveLength(1));
  });

  it("a maxBufferedBytes of NaN ends the loop slow_consumer rather than lifting the bound", async () => {
    const p = await hostSending(3, 512 * 1024);
    const client = track(createNodeClient({ url: p.url, token: "t" }));
    const loop = client.follow("s", { maxBufferedBytes: Number.NaN })[Symbol.asyncIterator]();
    await vi.waitFor(() => expect(p.received("open")).toHaveLength(1));
    await client.call("session.list", {});
    const drained = (async () => {
      for (let read = 0; read < 5; read++) if ((await loop.next()).done) return "done";
      return "read on";
    })();
    await expect(drained).rejects.toMatchObject({ code: "slow_consumer" });
  });

  it("updates that carry no events weigh too: a host sending resets of 512 KiB epochs ends a loop bounded at 1 MiB", async () => {
    // Only an events update was weighed: a host could make a loop hold 10,000 resets (or opens),
    // each naming an epoch of up to a host message, past any maxBufferedBytes.
    const p = await peer({
      onOpen: (conn, f) => {
        const item = (value: unknown) => conn.send({ type: "item", id: f.id, value });
        item({ kind: "opened", epoch: "E1", headSeq: 0 });
        for (let i = 0; i < 3; i++) item({ kind: "reset", epoch: `${i}`.repeat(512 * 1024) });
        conn.send({ type: "end", id: f.id });
      },
      onCall: () => ({ sessions: [] }),
    });
    const client = track(createNodeClient({ url: p.url, token: "t" }));
    const loop = client.follow("s", { maxBufferedBytes: MIB })[Symbol.asyncIterator]();
    await vi.waitFor(() => expect(p.received("open")).toHaveLength(1));
    await client.call("session.list", {});
    expect(await loop.next()).toMatchObject({ value: { kind: "opened" } });
    expect(await loop.next()).toMatchObject({ value: { kind: "reset" } });
    await expect(loop.next()).rejects.toMatchObject({
      code: "slow_consumer",
      data: { maxBufferedBytes: MIB },
    });
  });

  it("by default a loop may fall 64 MiB behind: a host sending five events of 14 MiB ends it there", async () => {
    // Before, only 10,000 values were bounded: a host could make a for-await loop that had not
    // read its follow yet hold 10,000 items of up to a host message (17 MiB) each.
    const p = await hostSending(5, 14 * MIB);
    const client = track(createNodeClient({ url: p.url, token: "t" }));
    const loop = client.follow("s")[Symbol.asyncIterator]();
    await vi.waitFor(() => expect(p.received("open")).toHaveLength(1));
    await client.call("session.list", {});
    const kinds: string[] = [];
    const error = await (async () => {
      for (let next = await loop.next(); !next.done; next = await loop.next()) kinds.push(next.value.kind);
    })().catch((e: unknown) => e);
    expect(kinds).toEqual(["opened", "events", "events", "events", "events"]);
    expect(error).toMatchObject({ code: "slow_consumer", data: { maxBufferedBytes: 64 * MIB } });
  });

  it("a control loop weighs each value by its change: a host sending rows of 512 KiB titles ends a loop bounded at 1 MiB", async () => {
    // A control mirror's values were counted only: a host sending changes of up to a message each
    // made a loop that had not read them hold 10,000 of them (200 of 1 MiB: about 200 MiB).
    const row = (title: string) => ({
      sessionId: "s1",
      title,
      createdAt: 1,
      updatedAt: 1,
      lastPromptAt: 0,
      turnCount: 0,
      blank: true,
      lastState: "idle",
      live: true,
      running: false,
      seq: 1,
    });
    const p = await peer({
      onOpen: (conn, f) => {
        const item = (value: unknown) => conn.send({ type: "item", id: f.id, value });
        const none = { agents: [], queues: [], jobs: [], interactions: [] };
        item({ kind: "baseline", generation: "g1", ...none, projections: [row("t")] });
        for (let i = 0; i < 3; i++)
          item({ kind: "projection", sessionId: "s1", projection: row(`${i}`.repeat(512 * 1024)) });
      },
      onCall: () => ({ sessions: [] }),
    });
    const client = track(createNodeClient({ url: p.url, token: "t" }));
    const loop = client.control({ maxBufferedBytes: MIB })[Symbol.asyncIterator]();
    await vi.waitFor(() => expect(p.received("open")).toHaveLength(1));
    await client.call("session.list", {});
    expect(await loop.next()).toMatchObject({ value: { lastChange: { kind: "baseline" } } });
    expect(await loop.next()).toMatchObject({ value: { lastChange: { kind: "projection" } } });
    await expect(loop.next()).rejects.toMatchObject({
      code: "slow_consumer",
      data: { maxBufferedBytes: MIB },
    });
    await vi.waitFor(() => expect(p.received("close")).toHaveLength(1));
  });
});
