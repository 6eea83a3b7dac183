import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ALICE_TOKEN, BOB_TOKEN, startTestHost, type TestHost } from "../../support/host.js";
import type { MuxPeer } from "../../support/mux-peer.js";
import { until } from "../../support/until.js";
import { connect, createSession } from "./mux-fixture.js";

describe("event frames (protocol-v1 §6)", () => {
  let host: TestHost;
  let alice: MuxPeer;
  let alice2: MuxPeer;
  let bob: MuxPeer;
  beforeAll(async () => {
    host = await startTestHost();
    alice = await connect(host, { token: ALICE_TOKEN });
    alice2 = await connect(host, { token: ALICE_TOKEN });
    bob = await connect(host, { token: BOB_TOKEN });
  });
  afterAll(async () => {
    await alice?.disconnect();
    await alice2?.disconnect();
    await bob?.disconnect();
    await host?.dispose();
  });

  const named = (peer: MuxPeer, name: string, sessionId: string) =>
    peer.notifications().find((f) => {
      const value = f.value as { row?: { sessionId: string }; sessionId?: string };
      return f.name === name && (value.row?.sessionId ?? value.sessionId) === sessionId;
    });

  it("session.added, session.updated and session.removed reach the owner, with no id and no sequence", async () => {
    const sessionId = await createSession(alice);
    const added = await until(() => named(alice, "session.added", sessionId), 10_000, "session.added");
    expect(added.id).toBeUndefined();
    expect(added.value).toMatchObject({ row: { sessionId } });
    await alice.call("session.rename", { sessionId, title: "renamed" });
    const updated = await until(
      () =>
        alice
          .notifications()
          .find(
            (f) =>
              f.name === "session.updated" && (f.value as { row: { title: string } }).row.title === "renamed",
          ),
      10_000,
      "session.updated",
    );
    expect(updated.value).toMatchObject({ row: { sessionId, title: "renamed" } });
    await alice.call("session.delete", { sessionId });
    const removed = await until(() => named(alice, "session.removed", sessionId), 10_000, "session.removed");
    expect(removed.value).toEqual({ sessionId });
  });

  it("a clear sends session.updated with the emptied row, to the owner's other sockets too", async () => {
    const sessionId = await createSession(alice);
    await alice.call("session.prompt", { sessionId, text: "before the clear", clientMessageId: "c1" });
    const rowOf = (f: { value?: unknown }) =>
      (f.value as { row: { sessionId: string; turnCount: number } }).row;
    await until(
      () =>
        alice2
          .notifications()
          .find(
            (f) =>
              f.name === "session.updated" && rowOf(f).sessionId === sessionId && rowOf(f).turnCount === 1,
          ),
      10_000,
      "the prompt's session.updated",
    );
    // refused session_busy until the echo turn has ended
    await until(
      () =>
        alice.call("session.clear", { sessionId }).then(
          () => true,
          (err: { code?: string }) => (err.code === "session_busy" ? false : Promise.reject(err)),
        ),
      10_000,
      "the clear",
    );
    const cleared = await until(
      () =>
        alice2
          .notifications()
          .find(
            (f) =>
              f.name === "session.updated" && rowOf(f).sessionId === sessionId && rowOf(f).turnCount === 0,
          ),
      10_000,
      "the clear's session.updated",
    );
    expect(cleared.value).toMatchObject({
      row: { sessionId, turnCount: 0, blank: true, lastState: "idle", lastPromptAt: null, seq: 0 },
    });
    expect(named(bob, "session.updated", sessionId)).toBeUndefined();
  });

  it("another principal never sees them", async () => {
    const sessionId = await createSession(alice);
    await until(() => named(alice, "session.added", sessionId), 10_000, "session.added");
    const own = await createSession(bob);
    await until(() => named(bob, "session.added", own), 10_000, "bob's own session.added");
    expect(named(bob, "session.added", sessionId)).toBeUndefined();
  });

  const titles = (peer: MuxPeer, sessionId: string) =>
    peer
      .notifications()
      .filter((f) => f.name === "session.updated")
      .map((f) => (f.value as { row: { sessionId: string; title: string } }).row)
      .filter((row) => row.sessionId === sessionId)
      .map((row) => row.title);

  it("one notification reaches every socket of the principal, in the same frames, and none of another", async () => {
    const sessionId = await createSession(alice);
    await alice2.call("session.rename", { sessionId, title: "shared" });
    for (const peer of [alice, alice2])
      await until(() => titles(peer, sessionId).includes("shared") || undefined, 10_000, "session.updated");
    const about = (peer: MuxPeer) =>
      peer.notifications().filter((f) => {
        const value = f.value as { row?: { sessionId: string }; sessionId?: string };
        return (value.row?.sessionId ?? value.sessionId) === sessionId;
      });
    expect(about(alice).map((f) => f.name)).toEqual(["session.added", "session.updated"]);
    expect(about(alice2)).toEqual(about(alice));
    expect(about(bob)).toEqual([]);
  });

  it("renames committed together send only the newest row; a later one still comes", async () => {
    const sessionId = await createSession(alice);
    await until(() => named(alice2, "session.added", sessionId), 10_000, "session.added");
    // submitted in one tick, so the store commits them in one transaction and notifies in one run
    const together = await Promise.all(
      ["first", "second"].map((title) =>
        host.store.append(sessionId, [{ type: "session/renamed", data: { title } }]),
      ),
    );
    expect(together.map((o) => o.status)).toEqual(["appended", "appended"]);
    await alice.call("session.rename", { sessionId, title: "third" });
    for (const peer of [alice, alice2]) {
      await until(() => titles(peer, sessionId).includes("third") || undefined, 10_000, "third rename");
      expect(titles(peer, sessionId)).toEqual(["second", "third"]);
      expect(named(peer, "session.added", sessionId)).toBeDefined();
    }
  });

  it("a socket that stops reading gets no notifications past its high-water mark and stays open", async () => {
    const small = await startTestHost({ mux: { notificationHighWaterBytes: 64 * 1024 } });
    const reader = await connect(small, { token: ALICE_TOKEN });
    const stalled = await connect(small, { token: ALICE_TOKEN });
    try {
      const ids = Array.from({ length: 200 }, (_, i) => `n${i}`);
      await Promise.all(
        ids.map((sessionId) => small.store.create({ sessionId, owner: "alice", model: "demo-fast" })),
      );
      stalled.pause();
      // 120 rounds × 200 sessions × ~600 bytes ≈ 14 MiB: more than loopback buffers can hide.
      const filler = "t".repeat(500);
      for (let round = 0; round < 120; round++) {
        await Promise.all(
          ids.map((sessionId) =>
            small.store.append(sessionId, [
              { type: "session/renamed", data: { title: `${round} ${filler}` } },
            ]),
          ),
        );
      }
      const dropped = (await small.metrics.notificationsDropped.get()).values[0]?.value ?? 0;
      expect(dropped).toBeGreaterThan(0);
      // The reading socket of the same principal was never throttled.
      await until(
        () => titles(reader, "n199").some((t) => t.startsWith("119 ")) || undefined,
        20_000,
        "last round on the reading socket",
      );
      expect(stalled.ws.readyState).toBe(stalled.ws.OPEN);
      stalled.resume();
      const listed = await stalled.call<{ sessions: unknown[] }>("session.list", { limit: 5 });
      expect(listed.sessions).toHaveLength(5);
    } finally {
      await reader.disconnect();
      await stalled.disconnect();
      await small.dispose();
    }
  });
});
