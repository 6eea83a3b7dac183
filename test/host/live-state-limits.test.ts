import { afterEach, describe, expect, test } from "vitest";
import { DemoAgent } from "../../src/agents/demo-agent.js";
import { ADMIN } from "../../src/host/principal.js";
import { SessionHost } from "../../src/host/session-host.js";
import { SqliteSessionStore } from "../../src/store/sqlite-store.js";
import { tempDir } from "../support/temp-dir.js";
import { errorCode, readLog } from "./host-fixture.js";

/** Limits on live state (issue: bounded memory): typed errors, nothing accepted is lost. */

let dispose: (() => Promise<void>) | undefined;
afterEach(async () => {
  await dispose?.();
  dispose = undefined;
});

async function openLimitedHost(limits: {
  maxSessionsPerPrincipal?: number;
  maxStoredBytesPerPrincipal?: number;
  maxLiveAgentsPerPrincipal?: number;
  maxQueuedPromptsPerSession?: number;
  maxQueuedBytesPerPrincipal?: number;
}) {
  const dir = tempDir();
  const store = SqliteSessionStore.open(dir.file("sessions.db"));
  const host = new SessionHost({ store, agent: new DemoAgent(), ...limits });
  await host.start();
  dispose = async () => {
    await host.shutdown();
    await store.close();
    dir.remove();
  };
  return { host, store };
}

const live = (host: SessionHost) =>
  host.live
    .agents()
    .map((a) => a.sessionId)
    .sort();

describe("live agents per principal", () => {
  test("idle agents are detached least recently used first; with none idle a new one is too_many_agents", async () => {
    const { host, store } = await openLimitedHost({ maxLiveAgentsPerPrincipal: 2 });
    await host.call(ADMIN, "session.create", { sessionId: "c" });
    await host.call(ADMIN, "session.create", { sessionId: "a" });
    await host.call(ADMIN, "session.create", { sessionId: "b" });
    expect(live(host)).toEqual(["a", "b"]);
    await host.call(ADMIN, "session.prompt", { sessionId: "a", text: "/sleep 60000", clientMessageId: "a1" });
    await host.call(ADMIN, "session.prompt", { sessionId: "b", text: "/sleep 60000", clientMessageId: "b1" });
    const refused = await errorCode(() =>
      host.call(ADMIN, "session.prompt", { sessionId: "c", text: "hello", clientMessageId: "c1" }),
    );
    expect(refused).toMatchObject({ code: "too_many_agents", data: { sessionId: "c", max: 2 } });
    // refused before anything was accepted: no message, no prompt key
    expect((await readLog(store, "c")).filter((e) => e.type === "user/message")).toEqual([]);
    expect(await store.findPrompt("c", "c1")).toBeNull();
    expect(live(host)).toEqual(["a", "b"]);
    await host.call(ADMIN, "session.cancel", { sessionId: "a" });
    await expect
      .poll(async () => {
        const r = await errorCode(() =>
          host.call(ADMIN, "session.prompt", { sessionId: "c", text: "hello", clientMessageId: "c1" }),
        );
        return r.code;
      })
      .toBe("succeeded");
    expect(live(host)).toEqual(["b", "c"]);
  });
});

describe("creating past the live-agent limit", () => {
  test("a create or fork while every agent is at work creates the session without an agent, answers it and announces it", async () => {
    const { host, store } = await openLimitedHost({ maxLiveAgentsPerPrincipal: 1 });
    await host.call(ADMIN, "session.create", { sessionId: "busy" });
    await host.call(ADMIN, "session.prompt", {
      sessionId: "busy",
      text: "/sleep 60000",
      clientMessageId: "b1",
    });
    const added: string[] = [];
    host.subscribeNotifications(ADMIN, (n) => {
      if (n.name === "session.added") added.push(n.value.row.sessionId);
    });
    // the session is written either way: an error here would make a retry create a second one
    const created = await host.call(ADMIN, "session.create", { sessionId: "new" });
    expect(created.header).toMatchObject({ sessionId: "new", owner: "admin" });
    const forked = await host.call(ADMIN, "session.fork", { sourceId: "busy", sessionId: "copy" });
    expect(forked.header).toMatchObject({ sessionId: "copy", forkOf: { sessionId: "busy" } });
    expect((await store.header("new")).status).toBe("ok");
    expect((await store.header("copy")).status).toBe("ok");
    expect(live(host)).toEqual(["busy"]);
    await expect.poll(() => [...added].sort()).toEqual(["copy", "new"]);
    // its first prompt attaches the agent once one is free
    expect(
      await errorCode(() =>
        host.call(ADMIN, "session.prompt", { sessionId: "new", text: "hi", clientMessageId: "n1" }),
      ),
    ).toMatchObject({ code: "too_many_agents" });
    await host.call(ADMIN, "session.cancel", { sessionId: "busy" });
    await expect
      .poll(async () => {
        const r = await errorCode(() =>
          host.call(ADMIN, "session.prompt", { sessionId: "new", text: "hi", clientMessageId: "n1" }),
        );
        return r.code;
      })
      .toBe("succeeded");
    expect(live(host)).toEqual(["new"]);
  });
});

describe("queue limits", () => {
  test("queued prompts per session and queued bytes per principal answer queue_full and keep nothing", async () => {
    const { host, store } = await openLimitedHost({
      maxQueuedPromptsPerSession: 2,
      maxQueuedBytesPerPrincipal: 1000,
    });
    await host.call(ADMIN, "session.create", { sessionId: "s" });
    await host.call(ADMIN, "session.prompt", { sessionId: "s", text: "/approve hold", clientMessageId: "p" });
    await expect.poll(() => host.live.interactions().length).toBe(1);
    const q1 = await host.call(ADMIN, "session.prompt", {
      sessionId: "s",
      text: "one",
      clientMessageId: "q1",
    });
    expect(q1.queued).toBe(true);
    const big = await errorCode(() =>
      host.call(ADMIN, "session.prompt", { sessionId: "s", text: "x".repeat(1000), clientMessageId: "big" }),
    );
    expect(big).toMatchObject({ code: "queue_full", data: { limit: "bytes_per_owner", max: 1000 } });
    await host.call(ADMIN, "session.prompt", { sessionId: "s", text: "two", clientMessageId: "q2" });
    const third = await errorCode(() =>
      host.call(ADMIN, "session.prompt", { sessionId: "s", text: "three", clientMessageId: "q3" }),
    );
    expect(third).toMatchObject({ code: "queue_full", data: { limit: "items_per_session", max: 2 } });
    expect(await store.findPrompt("s", "q3")).toBeNull();
    expect(host.live.queue("s").map((i) => i.text)).toEqual(["one", "two"]);
    // after room is made, the same prompt is accepted
    await host.call(ADMIN, "session.updateQueue", {
      sessionId: "s",
      op: { remove: true, itemId: q1.itemId! },
    });
    expect(
      (await host.call(ADMIN, "session.prompt", { sessionId: "s", text: "three", clientMessageId: "q3" }))
        .queued,
    ).toBe(true);
  });
});

describe("queued prompt edits", () => {
  test("an edit that would take the principal past its queued bytes answers queue_full and keeps the item as it was", async () => {
    const { host } = await openLimitedHost({ maxQueuedBytesPerPrincipal: 100 });
    await host.call(ADMIN, "session.create", { sessionId: "s" });
    await host.call(ADMIN, "session.prompt", { sessionId: "s", text: "/approve hold", clientMessageId: "p" });
    await expect.poll(() => host.live.interactions().length).toBe(1);
    const queued = await host.call(ADMIN, "session.prompt", {
      sessionId: "s",
      text: "short",
      clientMessageId: "q",
    });
    const edit = (text: string) =>
      host.call(ADMIN, "session.updateQueue", {
        sessionId: "s",
        op: { edit: true, itemId: queued.itemId!, text },
      });
    expect(await errorCode(() => edit("x".repeat(101)))).toMatchObject({
      code: "queue_full",
      data: { sessionId: "s", limit: "bytes_per_owner", max: 100 },
    });
    expect(host.live.queue("s").map((i) => i.text)).toEqual(["short"]);
    expect((await edit("x".repeat(100))).items.map((i) => i.text)).toEqual(["x".repeat(100)]);
  });
});

describe("live sessions per principal", () => {
  test("a create or fork past the bound is too_many_sessions; a deleted session frees its place; the admin is exempt", async () => {
    const { host, store } = await openLimitedHost({ maxSessionsPerPrincipal: 2 });
    const bob = { name: "bob", admin: false };
    await host.call(bob, "session.create", { sessionId: "b1" });
    await host.call(bob, "session.create", { sessionId: "b2" });
    for (const call of [
      () => host.call(bob, "session.create", { sessionId: "b3" }),
      () => host.call(bob, "session.fork", { sourceId: "b1", sessionId: "b1-fork" }),
    ]) {
      expect(await errorCode(call)).toEqual({ code: "too_many_sessions", data: { max: 2 } });
    }
    expect(await store.header("b3")).toEqual({ status: "not_found" });
    expect(await store.header("b1-fork")).toEqual({ status: "not_found" });
    // another principal's sessions and the admin's are counted apart
    await host.call({ name: "carol", admin: false }, "session.create", { sessionId: "c1" });
    for (const id of ["x1", "x2", "x3"]) await host.call(ADMIN, "session.create", { sessionId: id });
    await host.call(bob, "session.delete", { sessionId: "b2" });
    await host.call(bob, "session.fork", { sourceId: "b1", sessionId: "b1-fork" });
    expect((await store.list({ owner: "bob", limit: 10 })).rows.map((r) => r.sessionId).sort()).toEqual([
      "b1",
      "b1-fork",
    ]);
  });
});

describe("stored event data per principal", () => {
  const bob = { name: "bob", admin: false };
  const settled = async (store: SqliteSessionStore, sessionId: string, turns: number) =>
    expect
      .poll(async () => (await readLog(store, sessionId)).filter((e) => e.type === "turn/end").length)
      .toBe(turns);

  test("past the quota a prompt, create, fork, rename or model choice is storage_quota_exceeded and writes nothing; clearing makes room", async () => {
    const { host, store } = await openLimitedHost({ maxStoredBytesPerPrincipal: 20_000 });
    await host.call(bob, "session.create", { sessionId: "b1" });
    const text = "x".repeat(6000);
    // each prompt stores its text twice (the message, then the demo agent's echo)
    await host.call(bob, "session.prompt", { sessionId: "b1", text, clientMessageId: "p1" });
    await settled(store, "b1", 1);
    expect(await store.ownerStoredBytes("bob")).toBeLessThan(20_000);
    await host.call(bob, "session.prompt", { sessionId: "b1", text, clientMessageId: "p2" });
    await settled(store, "b1", 2);
    const stored = await store.ownerStoredBytes("bob");
    expect(stored).toBeGreaterThanOrEqual(20_000);

    const before = await readLog(store, "b1");
    for (const call of [
      () => host.call(bob, "session.prompt", { sessionId: "b1", text: "one more", clientMessageId: "p3" }),
      () => host.call(bob, "session.create", { sessionId: "b2" }),
      () => host.call(bob, "session.fork", { sourceId: "b1", sessionId: "b1-fork" }),
      () => host.call(bob, "session.rename", { sessionId: "b1", title: "renamed" }),
      () => host.call(bob, "session.selectModel", { sessionId: "b1", model: "demo-careful" }),
    ]) {
      expect(await errorCode(call)).toEqual({
        code: "storage_quota_exceeded",
        data: { maxBytes: 20_000, storedBytes: stored },
      });
    }
    expect(await readLog(store, "b1")).toEqual(before);
    expect(await store.findPrompt("b1", "p3")).toBeNull();
    expect(await store.header("b2")).toEqual({ status: "not_found" });
    expect(await store.header("b1-fork")).toEqual({ status: "not_found" });
    expect(await store.ownerStoredBytes("bob")).toBe(stored);

    // a prompt already answered still answers the same; the admin and other principals are not bound
    expect(
      await host.call(bob, "session.prompt", { sessionId: "b1", text, clientMessageId: "p2" }),
    ).toMatchObject({
      queued: false,
    });
    await host.call(ADMIN, "session.prompt", {
      sessionId: "b1",
      text: "from the operator",
      clientMessageId: "a1",
    });
    await settled(store, "b1", 3);
    await host.call({ name: "carol", admin: false }, "session.create", { sessionId: "c1" });

    await host.call(bob, "session.clear", { sessionId: "b1" });
    expect(await store.ownerStoredBytes("bob")).toBeLessThan(1000);
    await host.call(bob, "session.prompt", { sessionId: "b1", text: "room again", clientMessageId: "p4" });
    await host.call(bob, "session.create", { sessionId: "b2" });
    await host.call(bob, "session.rename", { sessionId: "b1", title: "renamed" });
  });
});
