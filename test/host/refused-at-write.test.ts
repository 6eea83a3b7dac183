import { describe, expect, test } from "vitest";
import { DemoAgent } from "../../src/agents/demo-agent.js";
import type { ControlDelta } from "../../src/host/live/live-state.js";
import type { Principal } from "../../src/host/principal.js";
import { SessionHost } from "../../src/host/session-host.js";
import type { HostStore } from "../../src/store/live-state-store.js";
import { SqliteSessionStore } from "../../src/store/sqlite-store.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { DurableContent } from "../support/durable-snapshot.js";
import { tempDir } from "../support/temp-dir.js";
import { errorCode } from "./host-fixture.js";

/**
 * A prompt the store would refuse `queue_full` for the owner's queued bytes is refused before an
 * agent attaches for it: on a real host and SQLite file, with the demo agent. The sessions are
 * parked (a turn of a previous process waits on an approval), so a prompt queues behind the turn
 * and no agent runs until the approval is answered.
 */

const ALICE: Principal = { name: "alice", admin: false };
const S = "s";
/** The owner's queued bytes: the prompt already queued (15 bytes) leaves room for 5 more. */
const MAX_QUEUED_BYTES = 20;

const cleanups = cleanupsAfterEach();

/** Writes what a previous process left: `sessionId` parked on an approval, with a prompt queued behind it. */
async function parked(store: HostStore, sessionId: string, queued?: string): Promise<void> {
  await store.create({ sessionId, owner: "alice", model: "demo-fast" });
  const message = { messageId: "m", source: "user" as const, text: "deploy", attachments: [], meta: {} };
  await store.append(sessionId, [
    { type: "turn/start", data: { turnId: "t1", trigger: "prompt" } },
    { type: "user/message", data: message },
    {
      type: "interaction/requested",
      data: { turnId: "t1", interactionId: `${sessionId}-approval`, kind: "approval", action: "deploy" },
    },
  ]);
  if (queued !== undefined)
    expect(
      (
        await store.enqueuePrompt({
          sessionId,
          itemId: `${sessionId}-queued`,
          queuedAt: 1,
          input: { clientMessageId: `${sessionId}-q`, text: queued },
        })
      ).status,
    ).toBe("queued");
}

/** A host on a SQLite file whose session `s` a previous process left parked, one prompt queued. */
async function parkedOnSqlite() {
  const dir = tempDir();
  const path = dir.file("sessions.db");
  const store = SqliteSessionStore.open(path);
  await parked(store, S, "queued 15 bytes");
  await parked(store, "t");
  const host = new SessionHost({
    store,
    agent: new DemoAgent(),
    maxQueuedBytesPerPrincipal: MAX_QUEUED_BYTES,
  });
  await host.start();
  const content = new DurableContent(path);
  cleanups.push(async () => {
    content.close();
    await host.shutdown();
    await store.close();
    dir.remove();
  });
  expect(host.live.agents()).toEqual([]);
  return { host, store, content };
}

/** Every agent status the control stream tells `principal` of, from now on. */
function agentDeltas(host: SessionHost, principal: Principal): ControlDelta[] {
  const seen: ControlDelta[] = [];
  const off = host.subscribeControl(principal, (delta) => {
    if (delta.kind === "agent") seen.push(delta);
  });
  cleanups.push(async () => off());
  return seen;
}

async function agentsShown(host: SessionHost, principal: Principal): Promise<string[]> {
  return (await host.controlBaseline(principal)).agents.map((a) => a.sessionId);
}

const prompt = (host: SessionHost, sessionId: string, text: string, clientMessageId: string) =>
  host.call(ALICE, "session.prompt", { sessionId, text, clientMessageId });

describe("a prompt past the owner's queued bytes", () => {
  test("is refused before a parked session's agent attaches: none is ever shown, nothing durable changes", async () => {
    const { host, store, content } = await parkedOnSqlite();
    const before = content.snapshot();
    const shown = agentDeltas(host, ALICE);
    const refused = await errorCode(() => prompt(host, S, "more than five", "p3"));
    expect(refused).toEqual({
      code: "queue_full",
      data: { sessionId: S, limit: "bytes_per_owner", max: MAX_QUEUED_BYTES },
    });
    expect(host.live.agents()).toEqual([]);
    expect(shown).toEqual([]);
    expect(await agentsShown(host, ALICE)).toEqual([]);
    expect(content.snapshot()).toEqual(before);
    expect(await store.findPrompt(S, "p3")).toBeNull();
    // a prompt that fits still queues behind the parked turn
    expect(await prompt(host, S, "fits", "p4")).toMatchObject({ queued: true });
  });
});
