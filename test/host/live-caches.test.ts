import { describe, expect, it } from "vitest";
import type { Interaction, QueueItem, Resolution } from "../../protocol/index.js";
import { InteractionRegistry, InteractionWithdrawn } from "../../src/host/live/interaction-registry.js";
import { PromptQueue, toItem } from "../../src/host/live/prompt-queue.js";
import type { StoredQueueItem } from "../../src/store/live-state-store.js";

/**
 * The host's in-process caches of the store's pending interactions and durable queues: what the
 * host answers without an await (which turn is parked, which prompt is next) and the deltas the
 * control stream sees. The store decides; these must mirror it exactly.
 */
function interaction(
  interactionId: string,
  sessionId: string,
  turnId = `turn-${interactionId}`,
): Interaction {
  return { interactionId, sessionId, turnId, kind: "approval", requestedAt: 1, action: "run" };
}

function recordingRegistry() {
  const deltas: unknown[][] = [];
  const registry = new InteractionRegistry({
    requested: (...args) => deltas.push(["requested", ...args]),
    resolved: (...args) => deltas.push(["resolved", ...args]),
    withdrawn: (...args) => deltas.push(["withdrawn", ...args]),
  });
  return { registry, deltas };
}

const approve: Resolution = { outcome: "approve" };

describe("interaction registry", () => {
  it("a requested interaction is pending and emitted; a loaded one is pending without a delta", () => {
    const { registry, deltas } = recordingRegistry();
    registry.load(interaction("i1", "s1"), "alice");
    expect(deltas).toEqual([]);
    registry.requested(interaction("i2", "s1"), "alice");
    expect(deltas).toEqual([["requested", interaction("i2", "s1"), "alice"]]);
    expect(registry.get("i1")).toEqual(interaction("i1", "s1"));
    expect(registry.get("i2")).toEqual(interaction("i2", "s1"));
    expect(registry.get("i3")).toBeUndefined();
    expect(registry.pending()).toEqual([
      { interaction: interaction("i1", "s1"), owner: "alice" },
      { interaction: interaction("i2", "s1"), owner: "alice" },
    ]);
  });

  it("an answer settles the waiting turn with the resolution, after the delta, and forgets the interaction", async () => {
    const { registry, deltas } = recordingRegistry();
    const answered = registry.wait("i1");
    expect(registry.hasWaiter("i1")).toBe(true);
    registry.requested(interaction("i1", "s1"), "alice");
    registry.resolved("s1", "alice", "i1", approve);
    await expect(answered).resolves.toEqual(approve);
    expect(deltas.at(-1)).toEqual(["resolved", "s1", "alice", "i1", approve]);
    expect(registry.get("i1")).toBeUndefined();
    expect(registry.pending()).toEqual([]);
    expect(registry.hasWaiter("i1")).toBe(false);
  });

  it("a withdrawal rejects the waiting turn with InteractionWithdrawn and emits the delta", async () => {
    const { registry, deltas } = recordingRegistry();
    const answered = registry.wait("i1");
    registry.requested(interaction("i1", "s1"), "bob");
    registry.withdrawn("s1", "bob", "i1");
    const reason = await answered.catch((e: unknown) => e);
    expect(reason).toBeInstanceOf(InteractionWithdrawn);
    expect(reason).toMatchObject({ name: "InteractionWithdrawn", interactionId: "i1" });
    expect((reason as Error).message).toContain("i1");
    expect(deltas.at(-1)).toEqual(["withdrawn", "s1", "bob", "i1"]);
    expect(registry.get("i1")).toBeUndefined();
    expect(registry.hasWaiter("i1")).toBe(false);
  });

  it("an abandoned wait is never settled, and an answer without a waiter still emits", async () => {
    const { registry, deltas } = recordingRegistry();
    let settled = false;
    void registry.wait("i1").then(
      () => (settled = true),
      () => (settled = true),
    );
    registry.abandon("i1");
    expect(registry.hasWaiter("i1")).toBe(false);
    registry.requested(interaction("i1", "s1"), "alice");
    registry.resolved("s1", "alice", "i1", approve);
    await Promise.resolve();
    await Promise.resolve();
    expect(settled).toBe(false);
    expect(deltas.map((d) => d[0])).toEqual(["requested", "resolved"]);
  });

  it("a withdrawal after the turn stopped waiting raises no unhandled rejection", async () => {
    const { registry } = recordingRegistry();
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on("unhandledRejection", onUnhandled);
    try {
      void registry.wait("i1");
      registry.requested(interaction("i1", "s1"), "alice");
      registry.withdrawn("s1", "alice", "i1");
      await new Promise((resolve) => setImmediate(resolve));
      await new Promise((resolve) => setImmediate(resolve));
    } finally {
      process.off("unhandledRejection", onUnhandled);
    }
    expect(unhandled).toEqual([]);
  });

  it("the parked turn of a session is one of its pending interactions that no turn here awaits", () => {
    const { registry } = recordingRegistry();
    expect(registry.parkedTurn("s1")).toBeUndefined();
    registry.load(interaction("i1", "s1", "t1"), "alice");
    registry.load(interaction("i2", "s2", "t2"), "alice");
    expect(registry.parkedTurn("s1")).toBe("t1");
    expect(registry.parkedTurn("s2")).toBe("t2");

    // a turn of this process waits for i3: not parked
    void registry.wait("i3");
    registry.requested(interaction("i3", "s3", "t3"), "alice");
    expect(registry.parkedTurn("s3")).toBeUndefined();

    // a session with one awaited and one parked interaction: the parked one answers
    void registry.wait("i4");
    registry.requested(interaction("i4", "s1", "t1b"), "alice");
    expect(registry.parkedTurn("s1")).toBe("t1");

    registry.resolved("s1", "alice", "i1", approve);
    expect(registry.parkedTurn("s1")).toBeUndefined();
    registry.withdrawn("s2", "alice", "i2");
    expect(registry.parkedTurn("s2")).toBeUndefined();
  });

  it("an answer or withdrawal of an interaction this process never cached still emits, and throws nothing", () => {
    const { registry, deltas } = recordingRegistry();
    expect(() => registry.resolved("elsewhere", "alice", "i9", approve)).not.toThrow();
    expect(() => registry.withdrawn("elsewhere", "alice", "i8")).not.toThrow();
    expect(deltas).toEqual([
      ["resolved", "elsewhere", "alice", "i9", approve],
      ["withdrawn", "elsewhere", "alice", "i8"],
    ]);
  });

  it("a session's last answered interaction leaves nothing behind; its other pending ones stay", () => {
    const { registry } = recordingRegistry();
    registry.load(interaction("i1", "s1", "t1"), "alice");
    registry.load(interaction("i2", "s1", "t2"), "alice");
    registry.resolved("s1", "alice", "i1", approve);
    expect(registry.parkedTurn("s1")).toBe("t2");
    registry.resolved("s1", "alice", "i2", approve);
    expect(registry.parkedTurn("s1")).toBeUndefined();
    // the session's index was emptied: a new interaction of it is found again
    registry.load(interaction("i5", "s1", "t5"), "alice");
    expect(registry.parkedTurn("s1")).toBe("t5");
  });
});

function stored(
  itemId: string,
  sessionId: string,
  input: StoredQueueItem["input"],
  owner = "alice",
): StoredQueueItem {
  return { itemId, sessionId, owner, queuedAt: 10, input };
}

describe("prompt queue", () => {
  function recordingQueue() {
    const changes: { sessionId: string; owner: string; items: QueueItem[] }[] = [];
    const queue = new PromptQueue((sessionId, owner, items) => changes.push({ sessionId, owner, items }));
    return { queue, changes };
  }

  it("a loaded queue answers first, find, items and size without emitting", () => {
    const { queue, changes } = recordingQueue();
    const a = stored("a", "s1", { text: "one" });
    const b = stored("b", "s1", { text: "two", display: "shown" });
    queue.load("s1", [a, b]);
    expect(changes).toEqual([]);
    expect(queue.first("s1")).toEqual(a);
    expect(queue.find("s1", "b")).toEqual(b);
    expect(queue.find("s1", "c")).toBeUndefined();
    expect(queue.size("s1")).toBe(2);
    expect(queue.items("s1")).toEqual([
      { itemId: "a", text: "one", queuedAt: 10 },
      { itemId: "b", text: "shown", queuedAt: 10 },
    ]);
    expect(queue.all()).toEqual([{ sessionId: "s1", owner: "alice", items: queue.items("s1") }]);
  });

  it("an empty queue is not kept, loaded or applied", () => {
    const { queue } = recordingQueue();
    queue.load("s1", []);
    expect(queue.all()).toEqual([]);
    expect(queue.size("s1")).toBe(0);
    expect(queue.first("s1")).toBeUndefined();
    expect(queue.find("s1", "a")).toBeUndefined();
    expect(queue.items("s1")).toEqual([]);
  });

  it("a committed change replaces the session's queue and emits the wire items; an empty one removes it", () => {
    const { queue, changes } = recordingQueue();
    queue.load("s1", [stored("a", "s1", { text: "one" })]);
    queue.apply("s1", "alice", [stored("b", "s1", { text: "two" }), stored("c", "s1", { text: "three" })]);
    expect(queue.first("s1")?.itemId).toBe("b");
    expect(queue.size("s1")).toBe(2);
    expect(changes).toEqual([
      {
        sessionId: "s1",
        owner: "alice",
        items: [
          { itemId: "b", text: "two", queuedAt: 10 },
          { itemId: "c", text: "three", queuedAt: 10 },
        ],
      },
    ]);
    queue.apply("s1", "alice", []);
    expect(changes.at(-1)).toEqual({ sessionId: "s1", owner: "alice", items: [] });
    expect(queue.size("s1")).toBe(0);
    expect(queue.first("s1")).toBeUndefined();
    expect(queue.all()).toEqual([]);
  });

  it("all() lists every non-empty queue with its owner", () => {
    const { queue } = recordingQueue();
    queue.apply("s1", "alice", [stored("a", "s1", { text: "x" })]);
    queue.apply("s2", "bob", [stored("b", "s2", { text: "y" }, "bob")]);
    expect(queue.all()).toEqual([
      { sessionId: "s1", owner: "alice", items: [{ itemId: "a", text: "x", queuedAt: 10 }] },
      { sessionId: "s2", owner: "bob", items: [{ itemId: "b", text: "y", queuedAt: 10 }] },
    ]);
  });

  it("the wire item shows the display text when there is one, never the hidden input", () => {
    expect(toItem(stored("a", "s", { text: "secret prompt", display: "shown" }))).toEqual({
      itemId: "a",
      text: "shown",
      queuedAt: 10,
    });
    expect(toItem(stored("a", "s", { text: "plain" }))).toEqual({ itemId: "a", text: "plain", queuedAt: 10 });
  });
});
