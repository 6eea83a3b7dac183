import { afterEach, describe, expect, test, vi } from "vitest";
import { DemoAgent } from "../../src/agents/demo-agent.js";
import type { Principal } from "../../src/host/principal.js";
import { SessionHost } from "../../src/host/session-host.js";
import { SqliteSessionStore } from "../../src/store/sqlite-store.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { tempDir } from "../support/temp-dir.js";
import { errorCode, type HostFixture, openHost, turnEvents } from "./host-fixture.js";

/**
 * A call that asks a session for work and is refused changes nothing: a dismissal stays, and no
 * agent starts for it. On a real host and SQLite file, with the demo agent.
 */

const ALICE: Principal = { name: "alice", admin: false };

const disposers = cleanupsAfterEach();

async function open() {
  const dir = tempDir();
  const store = SqliteSessionStore.open(dir.file("sessions.db"));
  const host = new SessionHost({ store, agent: new DemoAgent(), maxQueuedPromptsPerSession: 1 });
  await host.start();
  disposers.push(async () => {
    await host.shutdown();
    await store.close();
    dir.remove();
  });
  await host.call(ALICE, "session.create", { sessionId: "s" });
  await host.call(ALICE, "session.create", { sessionId: "other" });
  return { host, store };
}

type Opened = Awaited<ReturnType<typeof open>>;

/** A turn of `s` that waits on an approval, so later prompts queue behind it. */
async function waitingOnApproval({ host }: Pick<Opened, "host">, clientMessageId: string): Promise<string> {
  await host.call(ALICE, "session.prompt", { sessionId: "s", text: "/approve deploy", clientMessageId });
  const pending = await vi.waitFor(() => {
    const found = host.live.interactions().find((i) => i.sessionId === "s");
    expect(found).toBeDefined();
    return found!;
  });
  return pending.interactionId;
}

/**
 * A prompt to the dismissed `other` succeeds and its restore lands: a restore the refused call
 * had started earlier would have landed by then too.
 */
async function laterWorkRestored({ host, store }: Opened): Promise<void> {
  await host.call(ALICE, "session.dismiss", { sessionId: "other" });
  await host.call(ALICE, "session.prompt", { sessionId: "other", text: "hello", clientMessageId: "o" });
  await vi.waitFor(async () => expect(await store.isDismissed("other", "alice")).toBe(false));
}

async function listed(host: SessionHost, dismissed: boolean): Promise<string[]> {
  return (await host.call(ALICE, "session.list", { dismissed })).sessions.map((row) => row.sessionId);
}

describe("a refused call leaves a dismissal as it was", () => {
  test("a prompt refused queue_full once its session was resolved", async () => {
    const opened = await open();
    const { host, store } = opened;
    await waitingOnApproval(opened, "p1");
    expect(
      await host.call(ALICE, "session.prompt", { sessionId: "s", text: "queued", clientMessageId: "p2" }),
    ).toMatchObject({ queued: true });
    await host.call(ALICE, "session.dismiss", { sessionId: "s" });
    const refused = await errorCode(() =>
      host.call(ALICE, "session.prompt", { sessionId: "s", text: "one more", clientMessageId: "p3" }),
    );
    expect(refused.code).toBe("queue_full");
    await laterWorkRestored(opened);
    expect(await store.isDismissed("s", "alice")).toBe(true);
    expect(await listed(host, false)).not.toContain("s");
    expect(await listed(host, true)).toEqual(["s"]);
  });

  test("an answer refused interaction_already_resolved, or of the other kind", async () => {
    const opened = await open();
    const { host, store } = opened;
    const interactionId = await waitingOnApproval(opened, "p1");
    await host.call(ALICE, "session.respond", { interactionId, response: { outcome: "approve" } });
    await host.call(ALICE, "session.dismiss", { sessionId: "s" });
    expect(
      await errorCode(() =>
        host.call(ALICE, "session.respond", { interactionId, response: { outcome: "deny" } }),
      ),
    ).toEqual({
      code: "interaction_already_resolved",
      data: { interactionId, resolution: { outcome: "approve" } },
    });
    expect(
      (
        await errorCode(() =>
          host.call(ALICE, "session.respond", { interactionId, response: { answer: "no" } }),
        )
      ).code,
    ).toBe("bad_request");
    await laterWorkRestored(opened);
    expect(await store.isDismissed("s", "alice")).toBe(true);
    expect(await listed(host, false)).not.toContain("s");
  });
});

describe("a prompt refused queue_full starts no agent", () => {
  test("a parked session whose queue is full stays without an agent", async () => {
    const dir = tempDir();
    const path = dir.file("sessions.db");
    const boot = async () => {
      const store = SqliteSessionStore.open(path);
      const host = new SessionHost({ store, agent: new DemoAgent(), maxQueuedPromptsPerSession: 1 });
      await host.start();
      return { host, store };
    };
    let running = await boot();
    disposers.push(async () => {
      await running.host.shutdown();
      await running.store.close();
      dir.remove();
    });
    await running.host.call(ALICE, "session.create", { sessionId: "s" });
    await waitingOnApproval(running, "p1");
    await running.host.call(ALICE, "session.prompt", {
      sessionId: "s",
      text: "queued",
      clientMessageId: "p2",
    });
    await running.host.shutdown();
    await running.store.close();
    running = await boot();
    // parked on its approval, its queue behind it: nothing runs until the answer
    expect(running.host.live.agents()).toEqual([]);
    const refused = await errorCode(() =>
      running.host.call(ALICE, "session.prompt", { sessionId: "s", text: "more", clientMessageId: "p3" }),
    );
    expect(refused).toEqual({
      code: "queue_full",
      data: { sessionId: "s", limit: "items_per_session", max: 1 },
    });
    expect(running.host.live.agents()).toEqual([]);
    expect(running.host.live.queue("s")).toHaveLength(1);
    // a repeat whose record lands after the first look still answers that record, as the store would
    vi.spyOn(running.store, "findPrompt").mockResolvedValueOnce(null);
    const repeated = await running.host.call(ALICE, "session.prompt", {
      sessionId: "s",
      text: "queued",
      clientMessageId: "p2",
    });
    expect(repeated).toEqual({ queued: true, itemId: running.host.live.queue("s")[0]?.itemId });
    expect(running.host.live.agents()).toEqual([]);
  });
});

describe("a refused answer to a parked turn starts no agent", () => {
  let fx: HostFixture;
  afterEach(async () => fx?.dispose());

  const S = "parked";

  /**
   * What a previous process left: a turn whose interaction `withdrawn` ended with it, then a turn
   * parked on `answered` (answered already) and `pending`.
   */
  async function parkedSession(): Promise<void> {
    await fx.store.create({ sessionId: S, owner: "admin", model: "demo-fast" });
    const message = { messageId: "m", source: "user" as const, text: "go", attachments: [], meta: {} };
    await fx.store.append(S, [
      { type: "turn/start", data: { turnId: "t0", trigger: "prompt" } },
      { type: "user/message", data: message },
      {
        type: "interaction/requested",
        data: { turnId: "t0", interactionId: "withdrawn", kind: "approval", action: "a" },
      },
      { type: "turn/end", data: { turnId: "t0", state: "interrupted" } },
      { type: "turn/start", data: { turnId: "t1", trigger: "prompt" } },
      { type: "user/message", data: { ...message, messageId: "m1" } },
      {
        type: "interaction/requested",
        data: { turnId: "t1", interactionId: "answered", kind: "approval", action: "b" },
      },
      {
        type: "interaction/requested",
        data: { turnId: "t1", interactionId: "pending", kind: "question", question: "which?" },
      },
    ]);
    expect((await fx.store.resolveInteraction("answered", { outcome: "approve" })).status).toBe("resolved");
    expect((await fx.store.interaction("withdrawn"))?.state).toBe("withdrawn");
  }

  const respond = (interactionId: string, response: { outcome: "approve" | "deny" } | { answer: string }) =>
    fx.host.call({ name: "admin", admin: true }, "session.respond", { interactionId, response });

  test("already answered otherwise, withdrawn or unknown: refused, and the session stays without an agent", async () => {
    fx = await openHost();
    await parkedSession();
    await fx.restart();
    expect(fx.host.live.agents()).toEqual([]);
    expect(await errorCode(() => respond("answered", { outcome: "deny" }))).toEqual({
      code: "interaction_already_resolved",
      data: { interactionId: "answered", resolution: { outcome: "approve" } },
    });
    expect(fx.host.live.agents()).toEqual([]);
    expect((await errorCode(() => respond("withdrawn", { outcome: "approve" }))).code).toBe(
      "interaction_not_found",
    );
    expect((await errorCode(() => respond("never", { outcome: "approve" }))).code).toBe(
      "interaction_not_found",
    );
    expect(fx.host.live.agents()).toEqual([]);
    // the answer given again is accepted as the repeat it is; there is still nothing to continue
    expect(await respond("answered", { outcome: "approve" })).toEqual({ resolved: true });
    expect(fx.host.live.agents()).toEqual([]);
    expect((await fx.store.projection(S))?.openTurnId).toBe("t1");
    // the last answer the turn waits for resumes it
    await respond("pending", { answer: "eu" });
    expect(fx.host.live.isLive(S)).toBe(true);
    const events = await turnEvents(fx.store, S, "t1");
    expect(events.at(-1)).toMatchObject({ type: "turn/end", data: { state: "completed" } });
  });
});
