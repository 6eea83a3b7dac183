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
