import { afterEach, beforeEach, describe, expect, test, vi } from "vitest";
import type { NewEvent } from "../../protocol/index.js";
import { type Ownership, SoleOwnership } from "../../src/host/host-leases.js";
import { LiveRegistry } from "../../src/host/live/live-registry.js";
import { LiveSession, RunningTurn, TurnStopped } from "../../src/host/live-session.js";
import { HostTurnContext } from "../../src/host/turn-context.js";
import type { SessionLease } from "../../src/store/session-lease.js";
import { SqliteSessionStore } from "../../src/store/sqlite-store.js";
import { tempDir } from "../support/temp-dir.js";
import { errorCode, readLog } from "./host-fixture.js";

/**
 * The agent's handle on a turn, on a real SQLite store: what its reads return at their bounds,
 * what its writes carry, and what it does once the session is gone or no longer this host's.
 */

const S = "ctx";
let dir: ReturnType<typeof tempDir>;
let store: SqliteSessionStore;

beforeEach(async () => {
  dir = tempDir();
  store = SqliteSessionStore.open(dir.file("sessions.db"));
  await store.create({ sessionId: S, owner: "admin", model: "demo-fast" });
});
afterEach(async () => {
  await store.close();
  dir.remove();
});

function context(options: { ownership?: Ownership; maxHistoryBytes?: number; now?: () => number } = {}) {
  const turn = new RunningTurn("t");
  const live = new LiveRegistry({ append: async () => undefined, progress: async () => undefined });
  const ctx = new HostTurnContext({
    store,
    live,
    ownership: options.ownership ?? new SoleOwnership(),
    session: new LiveSession(S, "admin", "demo-fast"),
    turn,
    prompt: { text: "", attachments: [] },
    now: options.now ?? Date.now,
    maxHistoryBytes: options.maxHistoryBytes ?? 32 * 1024 * 1024,
  });
  return { ctx, turn, live };
}

async function appendDeltas(count: number): Promise<void> {
  const events: NewEvent[] = Array.from({ length: count }, (_, i) => ({
    type: "assistant/delta",
    data: { turnId: "t", text: `d${i}` },
  }));
  for (let i = 0; i < events.length; i += 400) {
    const outcome = await store.append(S, events.slice(i, i + 400));
    expect(outcome.status).toBe("appended");
  }
}

describe("a turn's writes", () => {
  test("carry the host's clock, not the store's", async () => {
    const { ctx } = context({ now: () => 1_234_567 });
    await ctx.emit({ type: "assistant/delta", text: "at" });
    expect((await readLog(store, S)).at(-1)).toMatchObject({ at: 1_234_567, data: { text: "at" } });
  });

  test("once the session is deleted, writes and reads are refused session_retired", async () => {
    const { ctx } = context();
    expect((await store.delete(S)).status).toBe("deleted");
    expect((await errorCode(() => ctx.emit({ type: "assistant/delta", text: "late" }))).code).toBe(
      "session_retired",
    );
    expect((await errorCode(() => ctx.history())).code).toBe("session_retired");
    expect((await errorCode(() => ctx.historyPage())).code).toBe("session_retired");
  });
});

describe("a turn's history", () => {
  test("holds a log of exactly its bound; one byte less is transcript_too_large, naming the session and the bound", async () => {
    await appendDeltas(50);
    const read = await store.readAfter(S, 0, 1000);
    if (read.status !== "ok") throw new Error(read.status);
    const bytes = read.dataBytes;
    expect(await context({ maxHistoryBytes: bytes }).ctx.history()).toHaveLength(51);
    const refused = await errorCode(() => context({ maxHistoryBytes: bytes - 1 }).ctx.history());
    expect(refused).toEqual({
      code: "transcript_too_large",
      data: { sessionId: S, maxDataBytes: bytes - 1 },
    });
  });

  test("pages back from the head, then from the seq it is given, to the log's start", async () => {
    await appendDeltas(1_199); // with session/created: seqs 1..1200
    const { ctx } = context();
    const seqs = (page: { events: { seq: number }[] }) => [page.events[0]?.seq, page.events.at(-1)?.seq];
    const last = await ctx.historyPage();
    expect([seqs(last), last.hasMore]).toEqual([[701, 1200], true]);
    const middle = await ctx.historyPage(701);
    expect([seqs(middle), middle.hasMore]).toEqual([[201, 700], true]);
    const first = await ctx.historyPage(201);
    expect([seqs(first), first.hasMore]).toEqual([[1, 200], false]);
  });
});

describe("a turn on a host that is no longer the session's owner", () => {
  test("with no lease left, appends nothing: the turn stops as lost and the write rejects with that reason", async () => {
    const told: SessionLease[] = [];
    const { ctx, turn } = context({
      ownership: { fence: () => null, fenced: (l) => told.push(l) },
    });
    const head = (await readLog(store, S)).length;
    const refused = await ctx
      .emit({ type: "assistant/delta", text: "unfenced" })
      .catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(TurnStopped);
    expect((refused as TurnStopped).stop).toBe("lost");
    expect(turn.stopReason).toBe("lost");
    expect(await readLog(store, S)).toHaveLength(head);
    expect(told).toEqual([]);
  });

  test("with a lease another host took over, the store refuses the append; the owner is told, the turn stops as lost", async () => {
    const first = await store.acquireLease(S, "a", 1);
    if (first.status !== "acquired") throw new Error(first.status);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect((await store.acquireLease(S, "b", 60_000)).status).toBe("acquired");
    const told: SessionLease[] = [];
    const ownership: Ownership = {
      fence: () => ({ fence: first.lease }),
      fenced: (l) => told.push(l),
    };
    const { ctx, turn } = context({ ownership });
    const head = (await readLog(store, S)).length;
    const refused = await ctx.emit({ type: "assistant/delta", text: "fenced" }).catch((err: unknown) => err);
    expect((refused as TurnStopped).stop).toBe("lost");
    expect(turn.stopReason).toBe("lost");
    expect(told).toEqual([first.lease]);
    expect(await readLog(store, S)).toHaveLength(head);
  });
});

describe("a turn waiting on a person", () => {
  test("stopped meanwhile, leaves no waiter behind and counts no wait", async () => {
    const { ctx, turn, live } = context();
    const asked = ctx
      .requestInteraction({ kind: "question", question: "which?" })
      .catch((err: unknown) => err);
    const requested = await vi.waitFor(async () => {
      const event = (await readLog(store, S)).find((e) => e.type === "interaction/requested");
      if (event?.type !== "interaction/requested") throw new Error("not requested yet");
      return event.data.interactionId;
    });
    expect(live.interactionRegistry.hasWaiter(requested)).toBe(true);
    expect(turn.waiting).toBe(1);
    turn.stop("cancel");
    expect(((await asked) as TurnStopped).stop).toBe("cancel");
    expect(live.interactionRegistry.hasWaiter(requested)).toBe(false);
    expect(turn.waiting).toBe(0);
  });
});
