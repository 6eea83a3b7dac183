import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { NewEvent, SessionEvent } from "../../../protocol/index.js";
import { ALICE_TOKEN, BOB_TOKEN, startTestHost, type TestHost } from "../../support/host.js";
import type { MuxPeer } from "../../support/mux-peer.js";
import { until } from "../../support/until.js";
import { readWholeLog } from "../../support/whole-log.js";
import { appendDeltas, connect, createSession, expectRange, headSeq, STORE_VARIANTS } from "./mux-fixture.js";

type Item = { kind: string; epoch?: string; headSeq?: number; seq?: number; events?: SessionEvent[] };

describe.each(STORE_VARIANTS)("session.follow (protocol-v1 §5) ($name)", ({ options: variant }) => {
  let host: TestHost;
  let peer: MuxPeer;
  beforeAll(async () => {
    host = await startTestHost(variant);
    peer = await connect(host);
  });
  afterAll(async () => {
    await peer?.disconnect();
    await host?.dispose();
  });

  it("a deleted session refuses every read alike: one mapping of store outcomes (§7)", async () => {
    const sessionId = await createSession(peer);
    const live = peer.follow(sessionId);
    await peer.waitItem(live, (item) => item.kind === "caughtUp");
    await peer.call("session.delete", { sessionId });
    const during = (await peer.waitTerminal(live)).error;
    const after = (await peer.waitTerminal(peer.follow(sessionId))).error;
    const page = (await peer.callError("session.page", { sessionId })).toWire();
    for (const error of [during, after, page]) {
      expect(error?.code).toBe("session_retired");
      expect(error?.data).toEqual({ sessionId });
    }
    expect(new Set([during?.message, after?.message, page.message]).size).toBe(1);
  });

  it("listener before read: followers opened at random moments during /stream 2000 1 see exactly afterSeq+1 … end", async () => {
    const peers = [peer, await connect(host), await connect(host)];
    const sessionId = await createSession(peer);
    const main = peer.follow(sessionId);
    await peer.waitItem(main, (i) => i.kind === "caughtUp");
    await peer.call("session.prompt", { sessionId, text: "/stream 2000 1", clientMessageId: "m1" });
    const followers: { peer: MuxPeer; id: number; afterSeq: number }[] = [];
    for (let i = 0; i < 24; i++) {
      // A random moment: once the main follower has passed a random point of the turn.
      const point = Math.floor(Math.random() * 1900);
      await until(() => peer.lastSeq(main) >= point, 30_000, `seq ${point}`);
      const p = peers[i % peers.length] as MuxPeer;
      const afterSeq = Math.floor(Math.random() * (peer.lastSeq(main) + 1));
      followers.push({ peer: p, id: p.follow(sessionId, { afterSeq }), afterSeq });
    }
    await until(() => peer.events(main).some((e) => e.type === "turn/end"), 60_000, "turn/end");
    const end = await headSeq(host, sessionId);
    expect(end).toBeGreaterThan(2000);
    for (const f of followers) await f.peer.waitSeq(f.id, end, 30_000);
    for (const f of followers) {
      expectRange(f.peer.events(f.id), f.afterSeq + 1, end);
      expect(f.peer.items<Item>(f.id).filter((i) => i.kind === "caughtUp")).toHaveLength(1);
      expect(f.peer.terminal(f.id)).toBeUndefined();
    }
    expectRange(peer.events(main), 1, end);
    for (const p of peers.slice(1)) await p.disconnect();
    // a 2000-delta turn: past the 8 s of the mutation config on the asynchronous double
  }, 30_000);

  it("a follow opened at the head gets no events, then every event of a prompt", async () => {
    const sessionId = await createSession(peer);
    const head = await headSeq(host, sessionId);
    const id = peer.follow(sessionId, { afterSeq: head });
    const caughtUp = await peer.waitItem<Item>(id, (i) => i.kind === "caughtUp");
    expect(caughtUp.seq).toBe(head);
    expect(peer.events(id)).toHaveLength(0);
    await peer.call("session.prompt", { sessionId, text: "hello there", clientMessageId: "h1" });
    await until(() => peer.events(id).some((e) => e.type === "turn/end"), 20_000, "turn/end");
    const end = await headSeq(host, sessionId);
    expectRange(peer.events(id), head + 1, end);
    expect(peer.events(id)[0]?.type).toBe("turn/start");
    expect(peer.events(id)[1]?.type).toBe("user/message");
  });

  it("resuming twice without new commits delivers nothing the second time", async () => {
    const sessionId = await createSession(peer);
    await appendDeltas(host, sessionId, 10);
    const first = peer.follow(sessionId);
    const opened = await peer.waitItem<Item>(first, (i) => i.kind === "opened");
    await peer.waitItem(first, (i) => i.kind === "caughtUp");
    const cursor = { afterSeq: peer.lastSeq(first), epoch: opened.epoch as string };
    peer.close(first);
    for (let round = 0; round < 2; round++) {
      const id = peer.follow(sessionId, cursor);
      await peer.waitItem(id, (i) => i.kind === "caughtUp");
      expect(peer.items<Item>(id).map((i) => i.kind)).toEqual(["opened", "caughtUp"]);
      peer.close(id);
      expect((await peer.waitTerminal(id)).type).toBe("end");
    }
  });

  it("replays in batches of at most 500 events, caughtUp once, then live", async () => {
    const sessionId = await createSession(peer);
    const head = await appendDeltas(host, sessionId, 1_234, 617);
    const id = peer.follow(sessionId);
    await peer.waitItem(id, (i) => i.kind === "caughtUp");
    const items = peer.items<Item>(id);
    expect(items[0]).toMatchObject({ kind: "opened", headSeq: head });
    expect(items.filter((i) => i.kind === "events").every((i) => (i.events?.length ?? 0) <= 500)).toBe(true);
    expect(items.at(-1)).toEqual({ kind: "caughtUp", seq: head });
    await appendDeltas(host, sessionId, 3);
    await peer.waitSeq(id, head + 3);
    expectRange(peer.events(id), 1, head + 3);
    expect(peer.items<Item>(id).filter((i) => i.kind === "caughtUp")).toHaveLength(1);
  });

  it("replays unicode, binary and nested data exactly as readAfter returns it, across several log reads", async () => {
    const sessionId = await createSession(peer);
    const texts = [
      "plain",
      "héllo wörld ✓",
      "日本語のテキスト",
      "emoji 👩‍👩‍👧‍👦 and \u0000 nul",
      "x".repeat(300),
    ];
    const events: NewEvent[] = Array.from({ length: 4_321 }, (_, i) =>
      i % 3 === 0
        ? {
            type: "tool/call",
            data: {
              turnId: "t",
              toolCallId: `c${i}`,
              name: texts[i % texts.length] as string,
              args: { bytes: Uint8Array.of(i & 0xff, 0, 0xff), big: 2 ** 40 + i, neg: -i, ratio: i / 7 },
            },
          }
        : { type: "assistant/delta", data: { turnId: "t", text: `${texts[i % texts.length]} ${i}` } },
    );
    for (let i = 0; i < events.length; i += 1_000)
      await host.store.append(sessionId, events.slice(i, i + 1_000));
    const head = await headSeq(host, sessionId);
    const afterSeq = 7;
    const id = peer.follow(sessionId, { afterSeq });
    await peer.waitItem(id, (i) => i.kind === "caughtUp", 30_000);
    const stored = await readWholeLog(host.store, sessionId, afterSeq);
    if (stored.status !== "ok") throw new Error(stored.status);
    expect(stored.events).toHaveLength(head - afterSeq);
    expect(peer.events(id)).toEqual(stored.events);
    const batches = peer.items<Item>(id).filter((i) => i.kind === "events");
    expect(batches.every((i) => (i.events?.length ?? 0) <= 500)).toBe(true);
  });

  it("a stale epoch gets reset, then the log from seq 1", async () => {
    const sessionId = await createSession(peer);
    const head = await appendDeltas(host, sessionId, 5);
    const id = peer.follow(sessionId, { afterSeq: 3, epoch: "stale-epoch" });
    await peer.waitItem(id, (i) => i.kind === "caughtUp");
    const kinds = peer.items<Item>(id).map((i) => i.kind);
    expect(kinds.slice(0, 2)).toEqual(["opened", "reset"]);
    const opened = peer.items<Item>(id)[0] as Item;
    expect(peer.items<Item>(id)[1]).toEqual({ kind: "reset", epoch: opened.epoch });
    expectRange(peer.events(id), 1, head);
  });

  it("a clear while followed sends reset with the new epoch, the new log from seq 1 and caughtUp again", async () => {
    const sessionId = await createSession(peer);
    await appendDeltas(host, sessionId, 5);
    const id = peer.follow(sessionId);
    const opened = await peer.waitItem<Item>(id, (i) => i.kind === "opened");
    await peer.waitItem(id, (i) => i.kind === "caughtUp");
    const { epoch } = await peer.call<{ epoch: string }>("session.clear", { sessionId });
    expect(epoch).not.toBe(opened.epoch);
    const reset = await peer.waitItem<Item>(id, (i) => i.kind === "reset");
    expect(reset.epoch).toBe(epoch);
    // the new epoch's replay ends like the first one did: the follower knows it is live again
    await vi.waitFor(() => expect(peer.items<Item>(id).filter((i) => i.kind === "caughtUp")).toHaveLength(2));
    const kinds = peer.items<Item>(id).map((i) => i.kind);
    expect(kinds.indexOf("caughtUp", kinds.indexOf("reset"))).toBeGreaterThan(kinds.indexOf("reset"));
    const head = await appendDeltas(host, sessionId, 4);
    await peer.waitSeq(id, head);
    const items = peer.items<Item>(id);
    const after = items.slice(items.indexOf(reset) + 1).flatMap((i) => i.events ?? []);
    expectRange(after, 1, head);
    expect(peer.terminal(id)).toBeUndefined();
  });

  it("a delete while followed ends the stream with session_retired", async () => {
    const sessionId = await createSession(peer);
    const id = peer.follow(sessionId);
    await peer.waitItem(id, (i) => i.kind === "caughtUp");
    await peer.call("session.delete", { sessionId });
    expect((await peer.waitTerminal(id)).error?.code).toBe("session_retired");
  });

  it("afterSeq past the head in the same epoch → cursor_ahead", async () => {
    const sessionId = await createSession(peer);
    const head = await headSeq(host, sessionId);
    const id = peer.follow(sessionId, { afterSeq: head + 5 });
    const answer = await peer.waitTerminal(id);
    expect(answer.error?.code).toBe("cursor_ahead");
    expect(peer.items<Item>(id).map((i) => i.kind)).toEqual(["opened"]);
  });

  it("close ends the stream with end and nothing follows it", async () => {
    const sessionId = await createSession(peer);
    const id = peer.follow(sessionId);
    await peer.waitItem(id, (i) => i.kind === "caughtUp");
    peer.close(id);
    await peer.waitTerminal(id);
    const count = peer.of(id).length;
    const head = await appendDeltas(host, sessionId, 3);
    const probe = peer.follow(sessionId);
    await peer.waitSeq(probe, head);
    expect(peer.of(id)).toHaveLength(count);
  });

  it("another principal's session reads like a missing one", async () => {
    const alice = await connect(host, { token: ALICE_TOKEN });
    const bob = await connect(host, { token: BOB_TOKEN });
    const sessionId = await createSession(alice);
    const id = bob.follow(sessionId);
    expect((await bob.waitTerminal(id)).error?.code).toBe("session_not_found");
    const own = alice.follow(sessionId);
    await alice.waitItem(own, (i) => i.kind === "caughtUp");
    await alice.disconnect();
    await bob.disconnect();
  });
});
