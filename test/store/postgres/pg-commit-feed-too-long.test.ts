import { afterEach, describe, expect, it, vi } from "vitest";
import { decodePayload } from "../../../src/store/postgres/pg-notice-payload.js";
import type { PgReads } from "../../../src/store/postgres/pg-reads.js";
import type { CommitNotice } from "../../../src/store/session-store.js";
import { pgUrl } from "../contract/backends.js";
import { delta } from "../open-store.js";
import { holdNotices } from "./held-notices.js";
import { notifiesHandled, twoHostsFixture } from "./two-hosts.js";

/**
 * A batch that changes more sessions than a NOTIFY can list is announced as "re-read": every
 * other host then reads back what that batch (or a younger one) wrote, as after an outage of its
 * LISTEN connection, though it had none. Without that, a host that has been listening since it
 * started told its store-wide listeners (control streams, list notifications, HTTP list caches)
 * nothing of the sessions such a batch created.
 */
const openHosts = twoHostsFixture("feed_long");
const WAIT = { timeout: 30_000 };
const MANY = 300;
/** Long ids, so that the batch's list of sessions is far past what a NOTIFY carries. */
const longId = (i: number) => `created-in-one-batch-${"x".repeat(60)}-${String(i).padStart(4, "0")}`;

afterEach(() => {
  vi.restoreAllMocks();
});

describe.skipIf(!pgUrl)("PostgreSQL commit feed: a batch too large to list in its NOTIFY", () => {
  it("tells another host's listeners of every session it created, appended to or deleted", async () => {
    const { a, b } = await openHosts();
    // listening from the start, as a host's control streams and list caches are
    const told = new Map<string, CommitNotice[]>();
    b.subscribeAll((sessionId, notice) => told.set(sessionId, [...(told.get(sessionId) ?? []), notice]));
    await a.create({ sessionId: "followed", owner: "alice", model: "m" });
    await a.create({ sessionId: "gone", owner: "alice", model: "m" });
    await notifiesHandled({ a, b });
    told.clear();
    const followed: CommitNotice[] = [];
    b.subscribe("followed", (notice) => followed.push(notice));

    const notices = holdNotices(b);
    // queued in one tick: the group commit writes them in one or two transactions
    await Promise.all([
      a.append("followed", [delta("t", "one")]),
      a.delete("gone"),
      ...Array.from({ length: MANY }, (_, i) =>
        a.create({ sessionId: longId(i), owner: "alice", model: "m" }),
      ),
    ]);
    await vi.waitFor(() => expect(notices.held.length).toBeGreaterThan(0), WAIT);
    const payloads = notices.held.map(decodePayload);
    expect(payloads.some((p) => p.changes === "all")).toBe(true);
    notices.release();

    await vi.waitFor(() => {
      const created = [...told.keys()].filter((id) => id.startsWith("created-in-one-batch-"));
      expect(created.length).toBe(MANY);
    }, WAIT);
    for (let i = 0; i < MANY; i++) {
      const notices = told.get(longId(i))!;
      // each told once, as a session created (what a socket hears as `session.added`)
      expect(notices.length).toBe(1);
      expect(notices[0]!.kind === "create" || (notices[0]!.kind === "meta" && notices[0]!.created)).toBe(
        true,
      );
    }
    await vi.waitFor(() => expect(told.get("gone")?.map((n) => n.kind)).toEqual(["delete"]), WAIT);
    expect(told.get("followed")?.map((n) => n.kind)).toEqual(["append"]);
    await vi.waitFor(() => expect(followed.map((n) => n.kind)).toEqual(["append"]), WAIT);
  }, 60_000);

  it("reads back again, on a new LISTEN, when that re-read fails: the NOTIFYs after it name only their own sessions", async () => {
    const { a, b } = await openHosts();
    const told = new Set<string>();
    b.subscribeAll((sessionId) => told.add(sessionId));
    await a.create({ sessionId: "first", owner: "alice", model: "m" });
    await notifiesHandled({ a, b });
    const feed = (b as unknown as { feed: { reads: PgReads } }).feed;
    const projectionsWrittenSince = feed.reads.projectionsWrittenSince.bind(feed.reads);
    let failed = 0;
    vi.spyOn(feed.reads, "projectionsWrittenSince").mockImplementation(async (...args) => {
      if (failed === 0) {
        failed += 1;
        throw Object.assign(new Error("terminating connection due to administrator command"), {
          code: "57P01",
        });
      }
      return projectionsWrittenSince(...args);
    });

    await Promise.all(
      Array.from({ length: MANY }, (_, i) => a.create({ sessionId: longId(i), owner: "alice", model: "m" })),
    );
    // ordinary batches after it: they name only themselves
    for (let i = 0; i < 3; i++) await a.create({ sessionId: `after-${i}`, owner: "alice", model: "m" });

    await vi.waitFor(() => {
      expect(failed).toBe(1);
      const created = [...told].filter((id) => id.startsWith("created-in-one-batch-"));
      expect(created.length).toBe(MANY);
    }, WAIT);
  });

  it("reads back, for the next such batch, from the oldest transaction running when the previous re-read began", async () => {
    const { a, b } = await openHosts();
    const told = new Map<string, number>();
    b.subscribeAll((sessionId) => told.set(sessionId, (told.get(sessionId) ?? 0) + 1));
    type Watermark = { xid: string; xid8: string };
    const feed = (
      b as unknown as {
        feed: {
          reads: PgReads;
          listening: { since: Watermark };
          oldestRunning(): Promise<Watermark | null>;
        };
      }
    ).feed;
    const sinces: Watermark[] = [];
    const projectionsWrittenSince = feed.reads.projectionsWrittenSince.bind(feed.reads);
    vi.spyOn(feed.reads, "projectionsWrittenSince").mockImplementation(async (since, ...rest) => {
      if (sinces.at(-1) !== since) sinces.push(since);
      return projectionsWrittenSince(since, ...rest);
    });
    const taken: (Watermark | null)[] = [];
    const oldestRunning = feed.oldestRunning.bind(feed);
    feed.oldestRunning = async () => {
      const watermark = await oldestRunning();
      taken.push(watermark);
      return watermark;
    };
    const batch = (name: string) =>
      Promise.all(
        Array.from({ length: MANY }, (_, i) =>
          a.create({ sessionId: `${name}-${longId(i)}`, owner: "alice", model: "m" }),
        ),
      );
    const toldOf = (name: string) => [...told.keys()].filter((id) => id.startsWith(`${name}-`)).length;

    await batch("first");
    await vi.waitFor(() => expect(toldOf("first")).toBe(MANY), WAIT);
    await batch("second");
    await vi.waitFor(() => expect(toldOf("second")).toBe(MANY), WAIT);
    // the first from this LISTEN's watermark, each later one from the one the previous re-read took
    expect(sinces.length).toBeGreaterThanOrEqual(2);
    expect(sinces.length).toBe(taken.length);
    expect(sinces[0]).toBe(feed.listening.since);
    for (let i = 1; i < sinces.length; i++) expect(sinces[i]).toBe(taken[i - 1]);
    // each told once, however many re-reads found it
    expect([...told.values()].every((n) => n === 1)).toBe(true);
  }, 60_000);

  it("tells another host's live listeners of every queue it changed, and of the emptied queue of a session it deleted", async () => {
    const { a, b } = await openHosts();
    const queues = new Map<string, number[]>();
    b.subscribeLive((notice) => {
      if (notice.kind === "queue")
        queues.set(notice.sessionId, [...(queues.get(notice.sessionId) ?? []), notice.items.length]);
    });
    const ids = Array.from({ length: MANY }, (_, i) => longId(i));
    await Promise.all(
      [...ids, "gone"].map((sessionId) => a.create({ sessionId, owner: "alice", model: "m" })),
    );
    const enqueue = (sessionId: string) =>
      a.enqueuePrompt({ sessionId, itemId: "q1", queuedAt: 1, input: { text: "one" } });
    await enqueue("gone");
    await vi.waitFor(() => expect(queues.get("gone")).toEqual([1]), WAIT);

    await Promise.all([a.delete("gone"), ...ids.map(enqueue)]);
    await vi.waitFor(() => expect(queues.size).toBe(MANY + 1), WAIT);
    for (const sessionId of ids) expect(queues.get(sessionId)).toEqual([1]);
    await vi.waitFor(() => expect(queues.get("gone")).toEqual([1, 0]), WAIT);
  }, 60_000);
});
