import { afterEach, describe, expect, it, vi } from "vitest";
import type { Notification, SessionRow } from "../../protocol/index.js";
import { AGENT_ERROR_NEWS_MS, watchListChanges } from "../../src/host/list-notifier.js";
import type { LiveState } from "../../src/host/live/live-state.js";
import { NotificationHub } from "../../src/host/notifications.js";
import type { Principal } from "../../src/host/principal.js";
import type { CommitNotice, SessionProjection, SessionStore } from "../../src/store/session-store.js";
import { type HostFixture, openHost } from "./host-fixture.js";

/**
 * §6 `session.updated {row}`: sent to the session's owner when a commit moves the session in the
 * list (an operator's message) or renames it, and for nothing else; its row is the session's §4
 * `Row` at that commit.
 */

const ALICE: Principal = { name: "alice", admin: false };
const BOB: Principal = { name: "bob", admin: false };

let fx: HostFixture | undefined;
afterEach(async () => {
  await fx?.dispose();
  fx = undefined;
});

/** The `session.updated` rows a principal receives. */
function updatesOf(principal: Principal): SessionRow[] {
  const rows: SessionRow[] = [];
  fx!.host.subscribeNotifications(principal, (n: Notification) => {
    if (n.name === "session.updated") rows.push(n.value.row);
  });
  return rows;
}

/** Lets every notification published so far be delivered. */
const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

async function listRow(sessionId: string): Promise<SessionRow> {
  const { sessions } = await fx!.host.call(ALICE, "session.list", {});
  const row = sessions.find((s) => s.sessionId === sessionId);
  if (!row) throw new Error(`${sessionId} not listed`);
  return row;
}

describe("session.updated", () => {
  it("a rename sends the owner the session's whole row, as the list shows it; nobody else hears it", async () => {
    fx = await openHost();
    const alice = updatesOf(ALICE);
    const bob = updatesOf(BOB);
    await fx.host.call(ALICE, "session.create", { sessionId: "s", title: "first" });
    await settle();
    expect(alice).toEqual([]);
    await fx.host.call(ALICE, "session.rename", { sessionId: "s", title: "second" });
    await vi.waitFor(() => expect(alice).toHaveLength(1));
    expect(alice[0]).toStrictEqual(await listRow("s"));
    expect(alice[0]).toMatchObject({ sessionId: "s", title: "second", live: true, running: false, seq: 2 });
    expect(bob).toEqual([]);
  });

  it("an operator's prompt sends the row of its commit: live, running, the turn counted, seq the message's", async () => {
    fx = await openHost();
    await fx.host.call(ALICE, "session.create", { sessionId: "s" });
    const alice = updatesOf(ALICE);
    const r = await fx.host.call(ALICE, "session.prompt", {
      sessionId: "s",
      text: "hello",
      clientMessageId: "c1",
    });
    await vi.waitFor(() => expect(alice).toHaveLength(1));
    const row = alice[0]!;
    expect(row).toMatchObject({
      sessionId: "s",
      live: true,
      running: true,
      turnCount: 1,
      blank: false,
      lastState: "working",
      seq: r.seq,
    });
    expect(row.lastPromptAt).toBe(row.updatedAt);
    // what the turn commits after its message moves nothing in the list
    await vi.waitFor(async () => expect((await listRow("s")).lastState).toBe("completed"));
    await settle();
    expect(alice).toHaveLength(1);
    // an idle attached agent: live, not running
    await fx.host.call(ALICE, "session.rename", { sessionId: "s", title: "done" });
    await vi.waitFor(() => expect(alice).toHaveLength(2));
    expect(alice[1]).toStrictEqual(await listRow("s"));
    expect(alice[1]).toMatchObject({ live: true, running: false, lastState: "completed" });
  });

  it("a session with an open turn and no agent is not running", async () => {
    fx = await openHost();
    // created in the store alone: no agent attached
    await fx.store.create({ sessionId: "cold", owner: "alice", model: "demo-fast" });
    await fx.store.append("cold", [{ type: "turn/start", data: { turnId: "t1", trigger: "prompt" } }]);
    const alice = updatesOf(ALICE);
    await fx.store.append("cold", [{ type: "session/renamed", data: { title: "renamed" } }]);
    await vi.waitFor(() => expect(alice).toHaveLength(1));
    expect(alice[0]).toMatchObject({ title: "renamed", live: false, running: false, lastState: "working" });
  });

  it("is not sent for a server's message, a model change or a delete", async () => {
    fx = await openHost();
    await fx.host.call(ALICE, "session.create", { sessionId: "s" });
    const alice = updatesOf(ALICE);
    await fx.store.append("s", [
      {
        type: "user/message",
        data: { messageId: "m1", source: "server", text: "from the server", attachments: [], meta: {} },
      },
    ]);
    await fx.host.call(ALICE, "session.selectModel", { sessionId: "s", model: "demo-careful" });
    await fx.host.call(ALICE, "session.delete", { sessionId: "s" });
    await settle();
    expect(alice).toEqual([]);
    // a user's message appended the same way is sent
    await fx.host.call(ALICE, "session.create", { sessionId: "t" });
    await fx.store.append("t", [
      {
        type: "user/message",
        data: { messageId: "m2", source: "user", text: "typed", attachments: [], meta: {} },
      },
    ]);
    await vi.waitFor(() => expect(alice).toHaveLength(1));
    expect(alice[0]).toMatchObject({ sessionId: "t", seq: 2 });
  });
});

it("session.updated is sent for a clear, with the emptied row", async () => {
  fx = await openHost();
  await fx.host.call(ALICE, "session.create", { sessionId: "s" });
  await fx.store.append("s", [
    {
      type: "user/message",
      data: { messageId: "m1", source: "user", text: "typed", attachments: [], meta: {} },
    },
  ]);
  const alice = updatesOf(ALICE);
  await fx.host.call(ALICE, "session.clear", { sessionId: "s" });
  await vi.waitFor(() => expect(alice).toHaveLength(1));
  expect(alice[0]).toMatchObject({ sessionId: "s", seq: 0, blank: true, lastPromptAt: null, turnCount: 0 });
});

describe("agent.error of a turn another host ended", () => {
  const NOW = 1_800_000_000_000;
  /** The notifier on a store double whose one listener the test calls with remote appends. */
  function notifier() {
    let heard: Parameters<SessionStore["subscribeAll"]>[0] | undefined;
    const store = {
      subscribeAll: (listener: typeof heard) => {
        heard = listener;
        return () => undefined;
      },
    } as unknown as SessionStore;
    const live = {
      isLive: () => false,
      isRunning: () => false,
      queue: () => [],
      jobs: () => [],
    } as unknown as LiveState;
    const hub = new NotificationHub();
    const errors: Notification[] = [];
    hub.subscribe(ALICE, (n) => {
      if (n.name === "agent.error") errors.push(n);
    });
    watchListChanges(store, live, hub, () => NOW);
    const failedAt = (at: number, seq: number) =>
      heard!(
        "s",
        {
          kind: "append",
          epoch: "e",
          remote: true,
          events: [
            { seq, at, type: "turn/end", data: { turnId: `t${seq}`, state: "failed", error: `boom ${seq}` } },
          ],
        } as CommitNotice,
        { sessionId: "s", owner: "alice" } as SessionProjection,
      );
    return { errors, failedAt };
  }

  it("is told when heard as it happens, and not when read back long after (a LISTEN outage's catch-up)", async () => {
    const { errors, failedAt } = notifier();
    failedAt(NOW - 1_000, 5);
    failedAt(NOW - AGENT_ERROR_NEWS_MS - 1, 6);
    await settle();
    expect(errors).toEqual([{ name: "agent.error", value: { sessionId: "s", message: "boom 5" } }]);
  });
});
