import { describe, expect, test, vi } from "vitest";
import { type Notification, SessionmuxError } from "../../protocol/index.js";
import { Dismissals } from "../../src/host/dismissals.js";
import { LiveRegistry } from "../../src/host/live/live-registry.js";
import { NotificationHub } from "../../src/host/notifications.js";
import type { Principal } from "../../src/host/principal.js";
import { SqliteSessionStore } from "../../src/store/sqlite-store.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { capturedLogger } from "../support/log-capture.js";
import { tempDir } from "../support/temp-dir.js";

/**
 * The host's dismissals on a real SQLite file, without a host around them: what they do when the
 * session is gone by the time the store is asked (a delete that won the race against the call).
 */

const ALICE: Principal = { name: "alice", admin: false };

const disposers = cleanupsAfterEach();

function open() {
  const dir = tempDir();
  const store = SqliteSessionStore.open(dir.file("sessions.db"));
  const live = new LiveRegistry({ append: async () => undefined, progress: async () => undefined });
  const hub = new NotificationHub();
  const { logger, lines } = capturedLogger();
  const dismissals = new Dismissals(store, live, hub, () => 1_000, logger);
  disposers.push(async () => {
    await store.close();
    dir.remove();
  });
  const heard: Notification[] = [];
  hub.subscribe(ALICE, (n) => heard.push(n));
  // what list caches hear: the store's commit notices of dismissals
  let changes = 0;
  store.subscribeAll((_sessionId, notice, projection) => {
    if (notice.kind === "meta" && notice.dismissal) {
      expect(projection).toBeNull();
      changes++;
    }
  });
  return { store, dismissals, lines, heard, changes: () => changes };
}

describe("Dismissals", () => {
  test("dismissing or restoring a session that is gone answers session_not_found and tells no one", async () => {
    const { store, dismissals, heard, changes } = open();
    await store.create({ sessionId: "s", owner: "alice", model: "demo-fast" });
    await store.delete("s");
    for (const change of [() => dismissals.dismiss(ALICE, "s"), () => dismissals.restore(ALICE, "s")]) {
      await expect(change()).rejects.toMatchObject({ code: "session_not_found", data: { sessionId: "s" } });
    }
    await expect(dismissals.dismiss(ALICE, "never")).rejects.toMatchObject({ code: "session_not_found" });
    expect(changes()).toBe(0);
    expect(heard).toEqual([]);
  });

  test("a second dismissal, or a restore of what is not dismissed, changes nothing and tells no one", async () => {
    const { store, dismissals, heard, changes } = open();
    await store.create({ sessionId: "s", owner: "alice", model: "demo-fast" });
    await dismissals.restore(ALICE, "s");
    await dismissals.dismiss(ALICE, "s");
    await dismissals.dismiss(ALICE, "s");
    await vi.waitFor(() => expect(heard).toHaveLength(1));
    expect(changes()).toBe(1);
    await dismissals.restore(ALICE, "s");
    await dismissals.restore(ALICE, "s");
    await vi.waitFor(() => expect(heard).toHaveLength(2));
    expect(changes()).toBe(2);
    expect(heard.map((n) => n.name === "session.dismissed" && n.value.dismissed)).toEqual([true, false]);
    // a later notice of its own, so a stray one from the repeated calls would have been seen by now
    await store.create({ sessionId: "t", owner: "alice", model: "demo-fast" });
    await dismissals.dismiss(ALICE, "t");
    await vi.waitFor(() => expect(heard).toHaveLength(3));
    expect(changes()).toBe(3);
  });

  test("a dismissal that commits together with the session's delete settles, with no notice for the gone session", async () => {
    const { store, dismissals, heard, changes } = open();
    await store.create({ sessionId: "s", owner: "alice", model: "demo-fast" });
    // queued in the same tick: one transaction, and the dismissal's projection read finds nothing
    const dismissed = dismissals.dismiss(ALICE, "s");
    const deleted = store.delete("s");
    await expect(dismissed).resolves.toBeUndefined();
    expect(await deleted).toEqual({ status: "deleted" });
    expect(changes()).toBe(1);
    await store.create({ sessionId: "t", owner: "alice", model: "demo-fast" });
    await dismissals.dismiss(ALICE, "t");
    await vi.waitFor(() => expect(heard).toHaveLength(1));
    expect(heard[0]).toMatchObject({ name: "session.dismissed", value: { sessionId: "t" } });
  });

  test("restoring for work a session deleted between its read and its restore settles quietly; a deleted or never dismissed session only reads", async () => {
    const { store, dismissals, lines, heard } = open();
    for (const sessionId of ["plain", "gone", "racing"])
      await store.create({ sessionId, owner: "alice", model: "demo-fast" });
    await dismissals.dismiss(ALICE, "gone");
    await dismissals.dismiss(ALICE, "racing");
    await store.delete("plain");
    // the delete takes the dismissal with it: nothing is left to restore
    await store.delete("gone");
    // "racing" is deleted after its dismissal was read and before the restore runs
    const isDismissed = store.isDismissed.bind(store);
    vi.spyOn(store, "isDismissed").mockImplementation(async (sessionId, principal) => {
      const dismissed = await isDismissed(sessionId, principal);
      if (sessionId === "racing") await store.delete("racing");
      return dismissed;
    });
    const restore = vi.spyOn(dismissals, "restore");
    // the call whose work it follows keeps its answer: the session is on no list to restore it to
    for (const sessionId of ["plain", "gone", "racing"])
      await expect(dismissals.restoreForWork(ALICE, sessionId)).resolves.toBeUndefined();
    expect(restore.mock.calls.map(([, sessionId]) => sessionId)).toEqual(["racing"]);
    expect(lines.filter((l) => (l.level as number) >= 40)).toEqual([]);
    expect(heard.filter((n) => n.name === "session.dismissed")).toHaveLength(2);
  });

  test("restoring for work a dismissed session is durable once it resolves; a store's failure is its failure", async () => {
    const { store, dismissals, heard } = open();
    await store.create({ sessionId: "s", owner: "alice", model: "demo-fast" });
    await dismissals.dismiss(ALICE, "s");
    await dismissals.restoreForWork(ALICE, "s");
    expect(await store.isDismissed("s", "alice")).toBe(false);
    expect(heard.filter((n) => n.name === "session.dismissed")).toHaveLength(2);
    await dismissals.dismiss(ALICE, "s");
    vi.spyOn(store, "restore").mockRejectedValueOnce(new SessionmuxError("persistence_failure", "disk"));
    await expect(dismissals.restoreForWork(ALICE, "s")).rejects.toMatchObject({
      code: "persistence_failure",
    });
    expect(await store.isDismissed("s", "alice")).toBe(true);
  });
});
