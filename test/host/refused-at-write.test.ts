import pg from "pg";
import { describe, expect, test, vi } from "vitest";
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
import { openCluster, pgUrl } from "./multi-host-fixture.js";

/**
 * A refused prompt leaves no agent attached to a session that had none, and no lease held:
 * refused before the agent attaches where the host can tell (the owner's queued bytes), and the
 * agent let go again where only the store's write can tell (a concurrent prompt took the room,
 * the session was deleted after it was resolved). On a real host, a SQLite file and PostgreSQL,
 * with the demo agent. The sessions are parked (a turn of a previous process waits on an
 * approval), so a prompt queues behind the turn and no agent runs until the approval is answered.
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
/**
 * Queues another prompt of the owner (`t-queued`, in session `t`) between the host's next look at
 * the owner's queued bytes and its write; `snapshot` is the durable content just after it.
 */
function promptQueuedAfterLook(
  store: SqliteSessionStore,
  content: DurableContent,
): { snapshot: ReturnType<DurableContent["snapshot"]> | undefined } {
  const queuedBytes = store.queuedBytes.bind(store);
  const after: { snapshot: ReturnType<DurableContent["snapshot"]> | undefined } = { snapshot: undefined };
  vi.spyOn(store, "queuedBytes").mockImplementationOnce(async (owner) => {
    const seen = await queuedBytes(owner);
    const input = { clientMessageId: "t-q", text: "fill" };
    const other = await store.enqueuePrompt({ sessionId: "t", itemId: "t-queued", queuedAt: 2, input });
    expect(other.status).toBe("queued");
    after.snapshot = content.snapshot();
    return seen;
  });
  return after;
}

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
  test("taken by another write after the host looked: the store refuses it and the agent it attached goes again", async () => {
    const { host, store, content } = await parkedOnSqlite();
    // another prompt of the owner commits between the host's look and its write
    const before = promptQueuedAfterLook(store, content);
    const enqueue = vi.spyOn(store, "enqueuePrompt");
    const shown = agentDeltas(host, ALICE);
    const refused = await errorCode(() => prompt(host, S, "two!!", "p3"));
    expect(refused).toEqual({
      code: "queue_full",
      data: { sessionId: S, limit: "bytes_per_owner", max: MAX_QUEUED_BYTES },
    });
    // the store's check refused it: the host had attached the agent to queue the prompt
    expect(enqueue.mock.calls.filter(([input]) => input.sessionId === S)).toHaveLength(1);
    expect(shown.map((d) => d.kind === "agent" && [d.sessionId, d.state])).toEqual([
      [S, "attached"],
      [S, "detached"],
    ]);
    expect(host.live.agents()).toEqual([]);
    expect(await agentsShown(host, ALICE)).toEqual([]);
    expect(host.live.queue(S).map((i) => i.itemId)).toEqual([`${S}-queued`]);
    expect(await store.findPrompt(S, "p3")).toBeNull();
    expect(content.snapshot()).toEqual(before.snapshot);
    // the parked turn still continues once answered, on an agent attached then
    await host.call(ALICE, "session.respond", {
      interactionId: `${S}-approval`,
      response: { outcome: "approve" },
    });
    expect(host.live.isLive(S)).toBe(true);
  });

  test("taken after the host looked, on a session holding a prompt no agent ran: refused, and that prompt still waits", async () => {
    const { host, store, content } = await parkedOnSqlite();
    // queued by another writer while the session had no agent here: nothing started it
    await store.create({ sessionId: "q", owner: "alice", model: "demo-fast" });
    const waiting = { clientMessageId: "q-w", text: "w" };
    await store.enqueuePrompt({ sessionId: "q", itemId: "q-waiting", queuedAt: 1, input: waiting });
    await vi.waitFor(() => expect(host.live.queue("q").map((i) => i.itemId)).toEqual(["q-waiting"]));
    const before = promptQueuedAfterLook(store, content);
    const refused = await errorCode(() => prompt(host, "q", "more", "p3"));
    expect(refused).toEqual({
      code: "queue_full",
      data: { sessionId: "q", limit: "bytes_per_owner", max: MAX_QUEUED_BYTES },
    });
    expect(host.live.agents()).toEqual([]);
    expect(await agentsShown(host, ALICE)).toEqual([]);
    expect(host.live.queue("q").map((i) => i.itemId)).toEqual(["q-waiting"]);
    expect(content.snapshot()).toEqual(before.snapshot);
  });
});

describe("a prompt whose session is deleted after it was resolved", () => {
  test("SQLite: refused, and no agent stays attached to the deleted session", async () => {
    const { host, store, content } = await parkedOnSqlite();
    const header = store.header.bind(store);
    let reads = 0;
    let afterDelete: ReturnType<DurableContent["snapshot"]> | undefined;
    // the prompt reads the header to authorise, then again to resume: the delete lands after the second
    vi.spyOn(store, "header").mockImplementation(async (sessionId) => {
      const outcome = await header(sessionId);
      if (sessionId === S && ++reads === 2) {
        expect(await host.call(ALICE, "session.delete", { sessionId: S })).toEqual({ deleted: true });
        // the deleted log's rows go afterwards, a step at a time
        await store.purgesSettled();
        afterDelete = content.snapshot();
      }
      return outcome;
    });
    const shown = agentDeltas(host, ALICE);
    const refused = await errorCode(() => prompt(host, S, "more", "p3"));
    expect(afterDelete).toBeDefined();
    expect(refused.code).toBe("session_retired");
    expect(host.live.agents()).toEqual([]);
    expect(shown.at(-1)).toMatchObject({ kind: "agent", sessionId: S, state: "detached" });
    expect(await agentsShown(host, ALICE)).toEqual([]);
    expect(content.snapshot()).toEqual(afterDelete);
  });

  describe.skipIf(!pgUrl)("PostgreSQL, several hosts' leases", () => {
    test("deleted as its lease is taken: refused, no agent stays and the lease goes", async () => {
      const cluster = await openCluster(1);
      cleanups.push(() => cluster.dispose());
      const { host, store } = cluster.hosts[0]!;
      await parked(store, S);
      await vi.waitFor(() => expect(host.live.interactions().map((i) => i.sessionId)).toEqual([S]));
      const leases = host.leases!;
      const acquire = leases.acquire.bind(leases);
      // the delete commits after the lease was taken and before the agent attaches, as when both
      // writes share one commit and the delete's answer is handled first
      vi.spyOn(leases, "acquire").mockImplementationOnce(async (sessionId) => {
        const outcome = await acquire(sessionId);
        expect(outcome.status).toBe("acquired");
        expect(await host.call(ALICE, "session.delete", { sessionId })).toEqual({ deleted: true });
        return outcome;
      });
      const shown = agentDeltas(host, ALICE);
      const refused = await errorCode(() => prompt(host, S, "more", "p3"));
      expect(refused.code).toBe("session_retired");
      expect(host.live.agents()).toEqual([]);
      expect(shown.at(-1)).toMatchObject({ kind: "agent", sessionId: S, state: "detached" });
      expect(await agentsShown(host, ALICE)).toEqual([]);
      await vi.waitFor(() => expect(leases.lease(S)).toBeUndefined());
      const db = new pg.Client({ connectionString: pgUrl! });
      await db.connect();
      try {
        for (const table of ["leases", "queue_items", "prompt_keys", "sessions"]) {
          const rows = await db.query(
            `SELECT count(*)::int AS n FROM "${cluster.schema}".${table} WHERE session_id = $1`,
            [S],
          );
          // the tombstone stays in sessions; nothing else of the deleted session
          expect([table, rows.rows[0].n]).toEqual([table, table === "sessions" ? 1 : 0]);
        }
      } finally {
        await db.end();
      }
    });
  });
});
