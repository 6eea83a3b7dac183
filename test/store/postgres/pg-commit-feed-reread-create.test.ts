import { describe, expect, it } from "vitest";
import type { PgReads } from "../../../src/store/postgres/pg-reads.js";
import type { CommitNotice } from "../../../src/store/session-store.js";
import { pgUrl } from "../contract/backends.js";
import { turnEnd, turnStart, userMessage } from "../open-store.js";
import { notifiesHandled, twoHostsFixture } from "./two-hosts.js";

const openHosts = twoHostsFixture("feed_reread_create");
const WAIT = { timeout: 20_000 };

type Store = Awaited<ReturnType<typeof openHosts>>["b"];

/**
 * Runs `during` once, inside `b`'s next outage re-read, before it reads the rows written since
 * its previous LISTEN; `heard()` counts the NOTIFYs `b` has heard. Returns `b`'s feed.
 */
function onFirstReread(b: Store, during: (heard: () => number) => Promise<void>) {
  const feed = (b as unknown as { feed: { reads: PgReads; heard(text: string): void; listenAgain(): void } })
    .feed;
  let heard = 0;
  const hear = feed.heard.bind(feed);
  feed.heard = (text) => {
    heard++;
    hear(text);
  };
  const reads = feed.reads;
  const writtenSince = reads.projectionsWrittenSince.bind(reads);
  let once = false;
  reads.projectionsWrittenSince = async (since, after, limit) => {
    if (!once) {
      once = true;
      await during(() => heard);
    }
    return writtenSince(since, after, limit);
  };
  return feed;
}

/** Collects the seq of every event a subscriber on `store` is given for `sessionId`. */
function followSeqs(store: Store, sessionId: string, seqs: number[]): void {
  store.subscribe(sessionId, (notice) => {
    if (notice.kind === "append" || notice.kind === "create") seqs.push(...notice.events.map((e) => e.seq));
  });
}

/**
 * A session created, followed on B and appended to while B's re-read after a LISTEN outage runs:
 * the re-read tells it created from its row alone, so its rows are still B's to deliver when
 * their NOTIFYs are handled; taking the row's seq as delivered skipped them for good. The create's
 * own NOTIFY, handled after the re-read, gives its rows to the follower but does not tell the
 * session created again (the list notifier's `session.added` goes out once).
 */
describe.skipIf(!pgUrl)("PostgreSQL commit feed: a create committed while the outage re-read runs", () => {
  it("still gives a follower and store-wide listeners the appends after it", async () => {
    const { a, b } = await openHosts();
    const told: string[] = [];
    b.subscribeAll((sessionId, notice: CommitNotice) => {
      if (sessionId !== "y") return;
      if (notice.kind === "meta") told.push(`meta${notice.created ? " created" : ""}`);
      if (notice.kind === "append" || notice.kind === "create")
        told.push(
          `${notice.kind} ${notice.events.map((e) => (e.type === "turn/end" ? `${e.seq}:${e.data.state}` : e.seq)).join(",")}`,
        );
    });
    await a.create({ sessionId: "s0", owner: "o", model: "m" });
    await notifiesHandled({ a, b });
    const followed: number[] = [];
    const feed = onFirstReread(b, async (heard) => {
      const before = heard();
      await a.create({ sessionId: "y", owner: "o", model: "m" });
      // a follower on B subscribes to y
      followSeqs(b, "y", followed);
      await a.append("y", [turnStart("t1"), turnEnd("t1", "failed")]);
      await a.append("y", [userMessage("after")]);
      await expect.poll(heard, WAIT).toBeGreaterThan(before + 2);
    });
    feed.listenAgain();
    await expect.poll(() => told.includes("meta created"), WAIT).toBe(true);
    await notifiesHandled({ a, b });
    await notifiesHandled({ a, b });
    // the follower may be handed a later row first (it reads the gap from the log), but the last
    // commit reaches it and the store-wide listeners, and the failure is told
    expect(followed.at(-1)).toBe(4);
    expect(told.some((t) => t.includes("3:failed"))).toBe(true);
    expect(told.some((t) => /^(append|create) (.*,)?4$/.test(t))).toBe(true);
  });

  it("tells store-wide listeners once of a create committed while it runs, and gives a follower its rows", async () => {
    const { a, b } = await openHosts();
    // as the list notifier adds a session: a remote create's first page, or a re-read's created row
    const added: string[] = [];
    const told: number[] = [];
    b.subscribeAll((sessionId, notice: CommitNotice) => {
      if (notice.kind === "create" && notice.remote && notice.events[0]?.seq === 1) added.push(sessionId);
      if (notice.kind === "meta" && notice.created) added.push(sessionId);
      if (sessionId === "y" && (notice.kind === "append" || notice.kind === "create"))
        told.push(...notice.events.map((e) => e.seq));
    });
    await a.create({ sessionId: "s0", owner: "o", model: "m" });
    await expect.poll(() => added, WAIT).toEqual(["s0"]);
    const followed: number[] = [];
    let ran = false;
    const feed = onFirstReread(b, async (heard) => {
      ran = true;
      // the create commits, and its NOTIFY is heard, before the re-read reads the rows
      const before = heard();
      await a.create({ sessionId: "y", owner: "o", model: "m" });
      followSeqs(b, "y", followed);
      await expect.poll(heard, WAIT).toBeGreaterThan(before);
    });
    feed.listenAgain();
    await expect.poll(() => added.includes("y"), WAIT).toBe(true);
    expect(ran).toBe(true);
    // every NOTIFY heard before a later create was handled, the one of y's create too
    await notifiesHandled({ a, b });
    expect(added.filter((id) => id === "y")).toEqual(["y"]);
    // the create's row still reached the follower and the store-wide listeners
    expect(followed).toEqual([1]);
    expect(told).toEqual([1]);
    await a.append("y", [userMessage("later")]);
    await expect.poll(() => followed, WAIT).toEqual([1, 2]);
    expect(added.filter((id) => id === "y")).toEqual(["y"]);
  });
});
