import { describe, expect, it, vi } from "vitest";
import type { FollowUpdate } from "../../src/client/follow-cursor.js";
import { followSession } from "../../src/client/follow-session.js";
import { createNodeClient } from "../../src/client/node.js";
import type { PeerConnection } from "./fake-peer.js";
import { peerFixture } from "./peer-fixture.js";

const { cleanups, peer, track } = peerFixture();
const instant = { baseMs: 0, capMs: 0 };
const renamed = (seq: number, title: string) => ({ seq, at: 1, type: "session/renamed", data: { title } });

/**
 * One session's log as a host serves `session.follow` (§5): a stale epoch gets `reset` and the
 * whole new log, a cursor in the current epoch gets what follows it, one past the head
 * `cursor_ahead`. `cutAfterOpened` drops the socket right after the next `opened`, before the
 * `reset` that would follow it.
 */
function sessionLog() {
  const log = {
    epoch: "E1",
    events: [renamed(1, "old-1"), renamed(2, "old-2")],
    cutAfterOpened: false,
    clear(epoch: string, titles: string[]) {
      log.epoch = epoch;
      log.events = titles.map((title, i) => renamed(i + 1, title));
    },
    serve(conn: PeerConnection, f: { id: number; params: unknown }) {
      const { afterSeq = 0, epoch } = f.params as { afterSeq?: number; epoch?: string };
      const item = (value: unknown) => conn.send({ type: "item", id: f.id, value });
      item({ kind: "opened", epoch: log.epoch, headSeq: log.events.length });
      if (log.cutAfterOpened) {
        log.cutAfterOpened = false;
        conn.socket.terminate();
        return;
      }
      const stale = epoch !== undefined && epoch !== log.epoch;
      if (!stale && afterSeq > log.events.length) {
        const error = { code: "cursor_ahead", message: "ahead", category: "business", retryable: false };
        conn.send({ type: "error", id: f.id, error });
        return;
      }
      if (stale) item({ kind: "reset", epoch: log.epoch });
      const from = stale ? 0 : afterSeq;
      item({ kind: "events", events: log.events.slice(from) });
      item({ kind: "caughtUp", seq: log.events.length });
    },
  };
  return log;
}

describe("a follow whose session was cleared while its socket was down", () => {
  it("keeps its old epoch until the reset arrives, so a socket lost right after opened still gets the reset and the whole new log", async () => {
    const log = sessionLog();
    const p = await peer({ onOpen: (conn, f) => log.serve(conn, f) });
    const client = track(createNodeClient({ url: p.url, token: "t", backoff: instant }));
    const updates: FollowUpdate[] = [];
    const seen: { error?: unknown } = {};
    const sub = followSession(client, "s", { backoff: instant }).subscribe({
      next: (u) => updates.push(u),
      error: (e) => (seen.error = e),
    });
    cleanups.push(() => sub.unsubscribe());
    await vi.waitFor(() => expect(updates.at(-1)?.kind).toBe("caughtUp"));

    // Cleared while the socket is down; the new log has more events than the old cursor's seq.
    log.clear("E2", ["new-1", "new-2", "new-3"]);
    log.cutAfterOpened = true;
    const before = updates.length;
    p.killAll();
    await vi.waitFor(() => expect(updates.at(-1)).toMatchObject({ kind: "caughtUp", seq: 3 }));

    const opens = p.received("open").map((f) => f.params);
    expect(opens).toEqual([
      { sessionId: "s", afterSeq: 0 },
      { sessionId: "s", afterSeq: 2, epoch: "E1" },
      // the reopen after the cut still names the epoch the follower mirrors
      { sessionId: "s", afterSeq: 2, epoch: "E1" },
    ]);
    const after = updates.slice(before);
    expect(after.map((u) => u.kind)).toEqual([
      "interrupted",
      "opened",
      "interrupted",
      "opened",
      "reset",
      "events",
      "caughtUp",
    ]);
    // No cursor ever paired the new epoch with the old log's seq.
    for (const u of after) {
      if (u.cursor.epoch === "E2") expect(u.cursor.seq).not.toBe(2);
    }
    const titles = after.flatMap((u) =>
      u.kind === "events" ? u.events.map((e) => (e.data as { title: string }).title) : [],
    );
    expect(titles).toEqual(["new-1", "new-2", "new-3"]);
    expect(seen.error).toBeUndefined();
  });
});
