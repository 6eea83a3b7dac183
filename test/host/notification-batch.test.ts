import { describe, expect, test } from "vitest";
import type { Notification, SessionRow } from "../../protocol/index.js";
import { NotificationBatch } from "../../src/host/notification-batch.js";

const row = (sessionId: string, title: string): SessionRow => ({
  sessionId,
  title,
  createdAt: 1,
  updatedAt: 1,
  lastPromptAt: null,
  turnCount: 0,
  blank: true,
  lastState: "idle",
  live: false,
  running: false,
  seq: 0,
});
const added = (id: string): Notification => ({ name: "session.added", value: { row: row(id, "new") } });
const updated = (id: string, title: string): Notification => ({
  name: "session.updated",
  value: { row: row(id, title) },
});
const removed = (id: string): Notification => ({ name: "session.removed", value: { sessionId: id } });
const failed = (id: string): Notification => ({
  name: "agent.error",
  value: { sessionId: id, message: "x" },
});

/** `name(session:title)` per entry, in order. */
function coalesced(...published: Notification[]): string[] {
  const batch = new NotificationBatch();
  for (const n of published) batch.add("alice", n);
  return batch.entries.map(({ notification: n }) =>
    n.name === "session.updated" ? `updated(${n.value.row.sessionId}:${n.value.row.title})` : n.name,
  );
}

describe("coalescing of one tick's notifications (protocol-v1 §6)", () => {
  test("two updates of one session leave only the last", () => {
    expect(coalesced(updated("a", "1"), updated("a", "2"))).toEqual(["updated(a:2)"]);
  });

  test("updates of different sessions are all kept; the newest row of each takes the first one's place", () => {
    expect(coalesced(updated("a", "1"), updated("b", "1"), updated("a", "2"))).toEqual([
      "updated(a:2)",
      "updated(b:1)",
    ]);
  });

  test("added then updated stays, and later updates fold into the one after added", () => {
    expect(coalesced(added("a"), updated("a", "1"), updated("a", "2"))).toEqual([
      "session.added",
      "updated(a:2)",
    ]);
  });

  test("an update never moves past added or removed of its session, and neither is dropped", () => {
    expect(
      coalesced(
        updated("a", "1"),
        removed("a"),
        added("a"),
        updated("a", "2"),
        updated("a", "3"),
        added("b"),
      ),
    ).toEqual(["updated(a:1)", "session.removed", "session.added", "updated(a:3)", "session.added"]);
  });

  test("an added, a removed or a dismissed of its session each give its later updates a new place", () => {
    const dismissed: Notification = {
      name: "session.dismissed",
      value: { sessionId: "a", dismissed: true, row: row("a", "d") },
    };
    expect(coalesced(updated("a", "1"), added("a"), updated("a", "2"))).toEqual([
      "updated(a:1)",
      "session.added",
      "updated(a:2)",
    ]);
    expect(coalesced(updated("a", "1"), removed("a"), updated("a", "2"))).toEqual([
      "updated(a:1)",
      "session.removed",
      "updated(a:2)",
    ]);
    expect(coalesced(updated("a", "1"), dismissed, updated("a", "2"))).toEqual([
      "updated(a:1)",
      "session.dismissed",
      "updated(a:2)",
    ]);
    // another session's added, removed or dismissal moves nothing of this one
    expect(coalesced(updated("a", "1"), added("b"), removed("b"), updated("a", "2"))).toEqual([
      "updated(a:2)",
      "session.added",
      "session.removed",
    ]);
  });

  test("agent.error is never coalesced", () => {
    expect(coalesced(failed("a"), updated("a", "1"), failed("a"), updated("a", "2"))).toEqual([
      "agent.error",
      "updated(a:2)",
      "agent.error",
    ]);
  });
});
