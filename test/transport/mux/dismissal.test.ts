import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SessionRow } from "../../../protocol/index.js";
import { ALICE_TOKEN, BOB_TOKEN, startTestHost, type TestHost } from "../../support/host.js";
import type { MuxPeer } from "../../support/mux-peer.js";
import { tempDir } from "../../support/temp-dir.js";
import { until } from "../../support/until.js";
import { connect, createSession } from "./mux-fixture.js";

/**
 * "Keep running" dismissal over real sockets: a person takes a session off their own list without
 * touching the session, and brings it back.
 */

type ListResult = { sessions: SessionRow[] };
const listIds = async (peer: MuxPeer, params: Record<string, unknown> = {}) =>
  (await peer.call<ListResult>("session.list", { limit: 200, ...params })).sessions.map((r) => r.sessionId);

let h: TestHost;
let alice: MuxPeer;
let aliceTab: MuxPeer;
let bob: MuxPeer;
let admin: MuxPeer;
beforeAll(async () => {
  h = await startTestHost();
  alice = await connect(h, { token: ALICE_TOKEN });
  aliceTab = await connect(h, { token: ALICE_TOKEN });
  bob = await connect(h, { token: BOB_TOKEN });
  admin = await connect(h);
});
afterAll(async () => {
  for (const peer of [alice, aliceTab, bob, admin]) await peer?.disconnect();
  await h?.dispose();
});

const dismissedFrames = (peer: MuxPeer, sessionId: string) =>
  peer
    .notifications()
    .filter(
      (f) => f.name === "session.dismissed" && (f.value as { sessionId: string }).sessionId === sessionId,
    )
    .map((f) => (f.value as { dismissed: boolean }).dismissed);

describe("keep-running dismissal", () => {
  it("a dismissed session leaves the principal's list while its agent keeps running and its log stays", async () => {
    const sessionId = await createSession(alice);
    await alice.call("session.prompt", { sessionId, text: "/stream 30 20", clientMessageId: "c1" });
    expect(await alice.call("session.dismiss", { sessionId })).toEqual({ dismissed: true });
    expect(await listIds(alice)).not.toContain(sessionId);
    expect(await listIds(alice, { dismissed: true })).toEqual([sessionId]);
    // the turn that was running when it was dismissed runs to its end
    await expect
      .poll(async () => (await h.store.projection(sessionId))?.lastState, { timeout: 15_000, interval: 25 })
      .toBe("completed");
    const page = await alice.call<{ events: { type: string }[] }>("session.page", { sessionId, limit: 1000 });
    expect(page.events.filter((e) => e.type === "assistant/delta").length).toBe(30);
    expect(await listIds(alice)).not.toContain(sessionId);
    expect(await alice.call("session.restore", { sessionId })).toEqual({ dismissed: false });
    expect(await listIds(alice)).toContain(sessionId);
    expect(await listIds(alice, { dismissed: true })).toEqual([]);
  });

  it("dismissal is per principal: the admin's list still shows what alice dismissed", async () => {
    const sessionId = await createSession(alice);
    await alice.call("session.dismiss", { sessionId });
    expect(await listIds(admin)).toContain(sessionId);
    await admin.call("session.dismiss", { sessionId });
    expect(await listIds(admin)).not.toContain(sessionId);
    await alice.call("session.restore", { sessionId });
    expect(await listIds(alice)).toContain(sessionId);
    expect(await listIds(admin)).not.toContain(sessionId);
    await admin.call("session.restore", { sessionId });
  });

  it("another principal's session cannot be dismissed or restored: session_not_found, nothing recorded", async () => {
    const sessionId = await createSession(alice);
    expect((await bob.callError("session.dismiss", { sessionId })).code).toBe("session_not_found");
    expect((await bob.callError("session.restore", { sessionId })).code).toBe("session_not_found");
    expect((await bob.callError("session.dismiss", { sessionId: "no-such-session" })).code).toBe(
      "session_not_found",
    );
    expect(await h.store.isDismissed(sessionId, "bob")).toBe(false);
    expect(await h.store.isDismissed(sessionId, "alice")).toBe(false);
  });

  it("the principal's other sockets are told (session.dismissed) and nobody else is", async () => {
    const sessionId = await createSession(alice);
    await alice.call("session.dismiss", { sessionId });
    await until(
      () => (dismissedFrames(aliceTab, sessionId).length === 1 ? true : undefined),
      10_000,
      "dismissed",
    );
    await alice.call("session.restore", { sessionId });
    await until(
      () => (dismissedFrames(aliceTab, sessionId).length === 2 ? true : undefined),
      10_000,
      "restored",
    );
    expect(dismissedFrames(aliceTab, sessionId)).toEqual([true, false]);
    expect(dismissedFrames(alice, sessionId)).toEqual([true, false]);
    // a repeated restore changes nothing and announces nothing: the next frame is the next dismissal
    await alice.call("session.restore", { sessionId });
    await alice.call("session.dismiss", { sessionId });
    await until(
      () => (dismissedFrames(aliceTab, sessionId).length === 3 ? true : undefined),
      10_000,
      "again",
    );
    expect(dismissedFrames(aliceTab, sessionId)).toEqual([true, false, true]);
    const frame = aliceTab
      .notifications()
      .find(
        (f) => f.name === "session.dismissed" && (f.value as { sessionId: string }).sessionId === sessionId,
      );
    expect((frame?.value as { row: SessionRow } | undefined)?.row).toMatchObject({ sessionId, blank: true });
    await admin.call("session.list", { limit: 1 });
    expect(dismissedFrames(admin, sessionId)).toEqual([]);
    expect(dismissedFrames(bob, sessionId)).toEqual([]);
  });

  it("a prompt to a dismissed session restores it; follow and page do not", async () => {
    const sessionId = await createSession(alice);
    await alice.call("session.dismiss", { sessionId });
    const follow = alice.follow(sessionId);
    await alice.waitItem(follow, (i) => i.kind === "caughtUp");
    await alice.call("session.page", { sessionId });
    expect(await listIds(alice, { dismissed: true })).toContain(sessionId);
    alice.close(follow);
    await alice.call("session.prompt", { sessionId, text: "back to work", clientMessageId: "p1" });
    await expect.poll(() => listIds(alice), { timeout: 10_000, interval: 25 }).toContain(sessionId);
    expect(await listIds(alice, { dismissed: true })).not.toContain(sessionId);
  });

  it("answering a question of a dismissed session restores it", async () => {
    const sessionId = await createSession(alice);
    await alice.call("session.prompt", { sessionId, text: "/approve deploy", clientMessageId: "a1" });
    const pending = await until(
      () => h.host.live.interactions().find((i) => i.sessionId === sessionId),
      15_000,
      "interaction",
    );
    await alice.call("session.dismiss", { sessionId });
    await alice.call("session.respond", {
      interactionId: pending.interactionId,
      response: { outcome: "approve" },
    });
    await expect.poll(() => listIds(alice), { timeout: 10_000, interval: 25 }).toContain(sessionId);
  });

  it("a refused answer, on the socket or the HTTP answer route, or a refused prompt leaves it dismissed", async () => {
    const sessionId = await createSession(alice);
    await alice.call("session.prompt", { sessionId, text: "/approve deploy", clientMessageId: "a1" });
    const pending = await until(
      () => h.host.live.interactions().find((i) => i.sessionId === sessionId),
      15_000,
      "interaction",
    );
    const { interactionId } = pending;
    await alice.call("session.respond", { interactionId, response: { outcome: "approve" } });
    await alice.call("session.dismiss", { sessionId });
    const deny = { outcome: "deny" };
    expect((await alice.callError("session.respond", { interactionId, response: deny })).code).toBe(
      "interaction_already_resolved",
    );
    const answered = await fetch(`${h.url}/v1/interactions/${interactionId}/answer`, {
      method: "POST",
      headers: { authorization: `Bearer ${ALICE_TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify(deny),
    });
    expect(answered.status).toBe(409);
    expect(await answered.json()).toMatchObject({ error: "interaction_already_resolved" });
    expect(
      (await alice.callError("session.prompt", { sessionId, text: "x", clientMessageId: "a2", model: 1 }))
        .code,
    ).toBe("bad_request");
    // a later prompt's restore of another session lands: one the refused calls started would have too
    const other = await createSession(alice);
    await alice.call("session.dismiss", { sessionId: other });
    await alice.call("session.prompt", { sessionId: other, text: "hello", clientMessageId: "o1" });
    await expect.poll(() => listIds(alice), { timeout: 10_000, interval: 25 }).toContain(other);
    expect(await listIds(alice)).not.toContain(sessionId);
    expect(await h.store.isDismissed(sessionId, "alice")).toBe(true);
    expect(dismissedFrames(aliceTab, sessionId)).toEqual([true]);
  });

  it("the HTTP session index leaves dismissed sessions out unless asked (dismissed=true)", async () => {
    const sessionId = await createSession(alice);
    const index = async (query: string) => {
      const res = await fetch(`${h.url}/api/chat/sessions?limit=200${query}`, {
        headers: { authorization: `Bearer ${ALICE_TOKEN}` },
      });
      expect(res.status).toBe(200);
      return ((await res.json()) as { sessions: { session_id: string }[] }).sessions.map((s) => s.session_id);
    };
    expect(await index("")).toContain(sessionId);
    await alice.call("session.dismiss", { sessionId });
    // the cached index answer is dropped by the dismissal
    expect(await index("")).not.toContain(sessionId);
    expect(await index("&dismissed=true")).toContain(sessionId);
    await alice.call("session.restore", { sessionId });
    expect(await index("")).toContain(sessionId);
    expect(await index("&dismissed=true")).not.toContain(sessionId);
  });
});

describe("dismissal across a restart", () => {
  it("a dismissal is durable: after a host restart on the same database the session is still off the list", async () => {
    const dir = tempDir();
    const dbPath = dir.file("sessions.db");
    try {
      const first = await startTestHost({ dbPath });
      const peer = await connect(first, { token: ALICE_TOKEN });
      const sessionId = await createSession(peer);
      await peer.call("session.dismiss", { sessionId });
      await peer.disconnect();
      await first.close();
      const second = await startTestHost({ dbPath });
      const again = await connect(second, { token: ALICE_TOKEN });
      try {
        expect(await listIds(again)).not.toContain(sessionId);
        expect(await listIds(again, { dismissed: true })).toEqual([sessionId]);
      } finally {
        await again.disconnect();
        await second.close();
      }
    } finally {
      dir.remove();
    }
  });
});
