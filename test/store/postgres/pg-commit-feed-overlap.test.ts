import pg from "pg";
import { afterEach, describe, expect, it, vi } from "vitest";
import { PgCommitFeed } from "../../../src/store/postgres/pg-commit-feed.js";
import { PgReads } from "../../../src/store/postgres/pg-reads.js";
import type { PostgresSessionStore } from "../../../src/store/postgres/postgres-store.js";
import type { CommitNotice, SessionProjection } from "../../../src/store/session-store.js";
import { pgUrl } from "../contract/backends.js";
import { delta } from "../open-store.js";
import { notifiesHandled, type TwoHosts, twoHostsFixture } from "./two-hosts.js";

/**
 * Where a host's own commits and another host's meet in its feed: a local commit that overtook the
 * other host's NOTIFY of the same session, a catch-up read that returns rows delivered meanwhile,
 * a catch-up longer than one page, a clear read before its own NOTIFY. Every delivery goes through
 * one per-session watermark: a subscriber hears each event once, in seq order, and no event of the
 * session is skipped between two it hears.
 */
const openHosts = twoHostsFixture("feed_overlap");
const WAIT = { timeout: 20_000 };
const S = "s";

afterEach(() => {
  vi.restoreAllMocks();
});

/** What a subscriber of `sessionId` on `store` hears: `append 3`, `append 3..5`, `clear`, … */
function notesOf(store: PostgresSessionStore, sessionId: string): string[] {
  const notes: string[] = [];
  store.subscribe(sessionId, (notice: CommitNotice) => {
    if (notice.kind !== "append" && notice.kind !== "create") return notes.push(notice.kind);
    const first = notice.events[0]?.seq;
    const last = notice.events.at(-1)?.seq;
    notes.push(first === last ? `${notice.kind} ${first}` : `${notice.kind} ${first}..${last}`);
  });
  return notes;
}

/** The clears a store-wide listener on `store` is given, each with its session's row. */
function clearsOn(store: PostgresSessionStore): [string, SessionProjection | null][] {
  const clears: [string, SessionProjection | null][] = [];
  store.subscribeAll((sessionId, notice, projection) => {
    if (notice.kind === "clear") clears.push([sessionId, projection]);
  });
  return clears;
}

/**
 * Holds back every NOTIFY the connections of this process hear until `release()`: another host's
 * NOTIFY reaches this one late. (A host skips its own NOTIFYs; held or not they change nothing.)
 */
function holdNotifications() {
  const held: (() => void)[] = [];
  let holding = true;
  const emit = pg.Client.prototype.emit;
  vi.spyOn(pg.Client.prototype, "emit").mockImplementation(function (
    this: pg.Client,
    event: string | symbol,
    ...args: unknown[]
  ) {
    if (event !== "notification" || !holding) return emit.call(this, event, ...args);
    held.push(() => emit.call(this, event, ...args));
    return true;
  });
  return {
    release() {
      holding = false;
      for (const deliver of held.splice(0)) deliver();
    },
  };
}

/** Makes every catch-up read of `sessionId` wait until `open()`; `waiting()` counts those begun. */
function gateReads(sessionId: string) {
  let open!: () => void;
  const gate = new Promise<void>((resolve) => {
    open = resolve;
  });
  let waiting = 0;
  const readAfter = PgReads.prototype.readAfter;
  const spy = vi.spyOn(PgReads.prototype, "readAfter").mockImplementation(async function (
    this: PgReads,
    id,
    after,
    limit,
  ) {
    if (id === sessionId) {
      waiting++;
      await gate;
    }
    return readAfter.call(this, id, after, limit);
  });
  return { spy, open, waiting: () => waiting };
}

/** Two hosts; B follows S, which A created and appended to (seq 2), and B delivered both. */
async function followedOnB() {
  const hosts = await openHosts();
  const heard = notesOf(hosts.b, S);
  await hosts.a.create({ sessionId: S, owner: "o", model: "m" });
  // (B reads the creation's NOTIFY after 2 was committed, it hears `create 1..2`)
  await vi.waitFor(() => expect(heard).toEqual(["create 1"]), WAIT);
  await hosts.a.append(S, [delta("t", "two")]);
  await vi.waitFor(() => expect(heard).toEqual(["create 1", "append 2"]), WAIT);
  return { ...hosts, heard };
}

/**
 * A commit of A's (3) whose NOTIFY B has not handled, then B's own (4): B's notice of 4 waits for
 * a catch-up read of 3, which waits at the gate (`reads.open()`); A's NOTIFYs are held back
 * (`notifies.release()`).
 */
async function localCommitHeld({ a, b }: Pick<TwoHosts, "a" | "b">) {
  const notifies = holdNotifications();
  const reads = gateReads(S);
  await a.append(S, [delta("t", "a3")]);
  await b.append(S, [delta("t", "b4")]);
  await vi.waitFor(() => expect(reads.waiting()).toBe(1), WAIT);
  return { notifies, reads };
}

describe.skipIf(!pgUrl)("PostgreSQL commit feed: local and remote deliveries of one session", () => {
  it("holds a local commit that overtook another host's NOTIFY until that host's rows were read", async () => {
    const hosts = await followedOnB();
    const { a, b, heard } = hosts;
    const notifies = holdNotifications();
    await a.append(S, [delta("t", "three")]);
    expect(await b.append(S, [delta("t", "four")])).toMatchObject({
      status: "appended",
      events: [{ seq: 4 }],
    });
    await vi.waitFor(() => expect(heard.at(-1)).toBe("append 4"), WAIT);
    notifies.release();
    // nothing is held any more: B's next commit goes out at once
    await b.append(S, [delta("t", "five")]);
    expect(heard.at(-1)).toBe("append 5");
    await notifiesHandled(hosts);
    expect(heard).toEqual(["create 1", "append 2", "append 3", "append 4", "append 5"]);
  });

  it("sends local commits held behind one read in commit order, each after the other host's rows before it", async () => {
    const hosts = await followedOnB();
    const { a, b, heard } = hosts;
    const { notifies, reads } = await localCommitHeld(hosts);
    await a.append(S, [delta("t", "a5")]);
    await b.append(S, [delta("t", "b6")]);
    expect(heard.at(-1)).toBe("append 2");
    reads.open();
    await vi.waitFor(() => expect(heard.at(-1)).toBe("append 6"), WAIT);
    // one read for each of B's commits that overtook rows of A: 3 for 4, 5 for 6
    expect(reads.spy.mock.calls.map(([id, after, limit]) => [id, after, limit])).toEqual([
      [S, 2, 1],
      [S, 4, 1],
    ]);
    notifies.release();
    await notifiesHandled(hosts);
    expect(heard).toEqual(["create 1", "append 2", "append 3", "append 4", "append 5", "append 6"]);
  });

  it("holds a local commit whose read failed until the re-read after listening again delivered the rows before it", async () => {
    const hosts = await followedOnB();
    const { a, b, heard } = hosts;
    const notifies = holdNotifications();
    vi.spyOn(PgReads.prototype, "readAfter").mockRejectedValueOnce(new Error("connection lost"));
    await a.append(S, [delta("t", "three")]);
    await b.append(S, [delta("t", "four")]);
    // B listens again, and its re-read reads S above 2: 3 (and 4, B's own, told as its hold ends);
    // A's NOTIFY of 3 is still held back
    await vi.waitFor(() => expect(heard.at(-1)).toBe("append 4"), WAIT);
    notifies.release();
    await notifiesHandled(hosts);
    expect(heard).toEqual(["create 1", "append 2", "append 3", "append 4"]);
  });

  it("drops a held local commit once the read it waited for found the session deleted", async () => {
    const hosts = await followedOnB();
    const { a, heard } = hosts;
    // B's notice of 4 waits for the read of 3, which runs only after the session is gone
    const { notifies, reads } = await localCommitHeld(hosts);
    await a.delete(S);
    reads.open();
    await vi.waitFor(() => expect(heard.at(-1)).toBe("delete"), WAIT);
    notifies.release();
    await notifiesHandled(hosts);
    // nothing of a deleted session after its delete
    expect(heard).toEqual(["create 1", "append 2", "delete"]);
  });

  it("reads nothing for a local commit once the last subscriber of its session left, and stays responsive", async () => {
    const hosts = await openHosts();
    const { a, b } = hosts;
    const feed = PgCommitFeed.prototype as unknown as { catchUp(...args: unknown[]): Promise<void> };
    const catchUp = feed.catchUp;
    let catchUpsOfS = 0;
    // a catch-up begun again and again would hold the process for good: past a few, it fails
    vi.spyOn(feed, "catchUp").mockImplementation(function (this: unknown, ...args: unknown[]) {
      if (args[0] === S && ++catchUpsOfS > 20) return Promise.reject(new Error("catch-up repeated"));
      return catchUp.apply(this, args);
    });
    await a.create({ sessionId: S, owner: "o", model: "m" });
    const seqs: number[] = [];
    const unsubscribe = b.subscribe(S, (notice) => {
      if (notice.kind === "append" || notice.kind === "create") seqs.push(...notice.events.map((e) => e.seq));
    });
    await a.append(S, [delta("t", "two")]);
    await vi.waitFor(() => expect(seqs).toContain(2), WAIT);
    unsubscribe();
    catchUpsOfS = 0;
    const notifies = holdNotifications();
    await a.append(S, [delta("t", "three")]);
    await b.append(S, [delta("t", "four")]);
    // B goes on: its timers fire and its next write commits
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(await b.append(S, [delta("t", "five")])).toMatchObject({ status: "appended" });
    notifies.release();
    await notifiesHandled(hosts);
    expect(catchUpsOfS).toBe(0);
    expect(seqs).toEqual([1, 2]);
  });

  it("tells its own commit held behind another host's rows as its own, though the read of those rows returned it too", async () => {
    const hosts = await followedOnB();
    const { a, b, heard } = hosts;
    const told: string[] = [];
    b.subscribeAll((sessionId, notice) => {
      if (sessionId === S && notice.kind === "append")
        told.push(`${notice.events.map((e) => e.seq).join(",")}${notice.remote ? " remote" : ""}`);
    });
    const reads = gateReads(S);
    await a.append(S, [delta("t", "a3")]);
    // B heard of 3 and reads after 2; that read waits, and B's own 4 is held behind 3
    await vi.waitFor(() => expect(reads.waiting()).toBe(1), WAIT);
    await b.append(S, [delta("t", "b4")]);
    reads.open();
    // the read finds 3 and 4: 4 is told as its hold ends, B's own, not as A's (and not twice)
    await vi.waitFor(() => expect(heard.at(-1)).toBe("append 4"), WAIT);
    await a.append(S, [delta("t", "a5")]);
    await vi.waitFor(() => expect(heard.at(-1)).toBe("append 5"), WAIT);
    await notifiesHandled(hosts);
    expect(heard).toEqual(["create 1", "append 2", "append 3", "append 4", "append 5"]);
    expect(told).toEqual(["3 remote", "4", "5 remote"]);
  });

  it("delivers of a read overlapping a local delivery only the events after it", async () => {
    const hosts = await openHosts();
    const { a, b } = hosts;
    await a.create({ sessionId: S, owner: "o", model: "m" });
    await a.append(S, [delta("t", "two")]);
    // B's subscriber read the log itself (to 2): B has delivered nothing of S
    await notifiesHandled(hosts);
    const heard = notesOf(b, S);
    const reads = gateReads(S);
    await a.append(S, [delta("t", "a3")]);
    await vi.waitFor(() => expect(reads.waiting()).toBe(1), WAIT);
    // delivered at once (B knows no head of S to wait behind)
    await b.append(S, [delta("t", "b4")]);
    expect(heard).toEqual(["append 4"]);
    await a.append(S, [delta("t", "a5")]);
    reads.open();
    // the read after 2 finds 3, 4 and 5: only 5 is new
    await vi.waitFor(() => expect(heard.at(-1)).toBe("append 5"), WAIT);
    await notifiesHandled(hosts);
    expect(heard).toEqual(["append 4", "append 5"]);
  });

  it("tells a subscriber of a clear once when a read found the new epoch before the clear's NOTIFY came", async () => {
    const hosts = await followedOnB();
    const { a, heard } = hosts;
    const reads = gateReads(S);
    await a.append(S, [delta("t", "three")]);
    await vi.waitFor(() => expect(reads.waiting()).toBe(1), WAIT);
    await a.clear(S);
    await a.append(S, [delta("t", "new epoch")]);
    // the read after 2 finds the new epoch: the clear, then the new epoch's events from its start
    reads.open();
    await vi.waitFor(() => expect(heard.at(-1)).toBe("append 1"), WAIT);
    await notifiesHandled(hosts);
    expect(heard).toEqual(["create 1", "append 2", "clear", "append 1"]);
  });

  it("announces a clear made between a held local commit and its read before the new epoch's events, once, and drops the commit", async () => {
    const hosts = await followedOnB();
    const { a, b, heard } = hosts;
    // B's 4 waits for a read of A's 3, which waits at the gate while A clears and appends
    const { notifies, reads } = await localCommitHeld(hosts);
    await a.clear(S);
    await a.append(S, [delta("t", "new epoch")]);
    reads.open();
    // the read finds the new epoch: the clear, its events from the start; the held 4 was
    // cleared (sent, it would set B's head back in the old epoch, and the clear's NOTIFY and
    // the new epoch's would be told again)
    await vi.waitFor(() => expect(heard.at(-1)).toBe("append 1"), WAIT);
    notifies.release();
    await notifiesHandled(hosts);
    // B's next commit goes out at once
    await b.append(S, [delta("t", "b2")]);
    expect(heard).toEqual(["create 1", "append 2", "clear", "append 1", "append 2"]);
  });

  it("delivers a creation read after later events as the creation's rows, then the later ones as appended, each once", async () => {
    const hosts = await openHosts();
    const { a, b } = hosts;
    const heard = notesOf(b, S);
    const notifies = holdNotifications();
    await a.create({ sessionId: S, owner: "o", model: "m" });
    await a.append(S, [delta("t", "two")]);
    await a.append(S, [delta("t", "three")]);
    // the creation's NOTIFY reads 1 alone, though 2 and 3 are there: a store-wide listener tells
    // a created session apart from what was appended to it (an append may be a failed turn); the
    // first append's NOTIFY reads 2..3, and the second's then has nothing new
    notifies.release();
    await notifiesHandled(hosts);
    expect(heard).toEqual(["create 1", "append 2..3"]);
  });

  it("announces as a creation only a read from the log's start, not one after a local commit", async () => {
    const hosts = await openHosts();
    const { a, b } = hosts;
    const heard = notesOf(b, S);
    const notifies = holdNotifications();
    await a.create({ sessionId: S, owner: "o", model: "m" });
    // B's own commit goes out at once (it knows no head to wait behind); the creation's NOTIFY,
    // handled after it, reads from there
    await b.append(S, [delta("t", "b2")]);
    await a.append(S, [delta("t", "a3")]);
    notifies.release();
    await notifiesHandled(hosts);
    expect(heard).toEqual(["append 2", "append 3"]);
  });

  it("reads a catch-up longer than a page page by page, delivering each page", async () => {
    const hosts = await followedOnB();
    const { a, heard } = hosts;
    const reads = vi.spyOn(PgReads.prototype, "readAfter");
    const events = Array.from({ length: 501 }, (_, i) => delta("t", `event ${i}`));
    expect(await a.append(S, events)).toMatchObject({ status: "appended" });
    await vi.waitFor(() => expect(heard.at(-1)).toBe("append 503"), WAIT);
    await notifiesHandled(hosts);
    expect(heard).toEqual(["create 1", "append 2", "append 3..502", "append 503"]);
    expect(reads.mock.calls.filter(([id]) => id === S).map(([, after, limit]) => [after, limit])).toEqual([
      [2, 500],
      [502, 500],
    ]);
  });

  it("gives a store-wide listener the session's row with a clear made on another host", async () => {
    const hosts = await openHosts();
    const { a, b } = hosts;
    const clears = clearsOn(b);
    await a.create({ sessionId: S, owner: "o", model: "m", title: "a title" });
    await a.append(S, [delta("t", "two")]);
    await a.clear(S);
    await vi.waitFor(() => expect(clears).toHaveLength(1), WAIT);
    expect(clears[0]).toEqual([S, expect.objectContaining({ sessionId: S, title: "a title" })]);
  });

  it("gives a store-wide listener the session's row with a clear a read found before the clear's NOTIFY", async () => {
    const hosts = await followedOnB();
    const { a, b } = hosts;
    const clears = clearsOn(b);
    const reads = gateReads(S);
    await a.append(S, [delta("t", "three")]);
    await vi.waitFor(() => expect(reads.waiting()).toBe(1), WAIT);
    const cleared = await a.clear(S);
    if (cleared.status !== "cleared") throw new Error(cleared.status);
    reads.open();
    await notifiesHandled(hosts);
    expect(clears).toEqual([[S, expect.objectContaining({ sessionId: S, epoch: cleared.epoch, seq: 0 })]]);
  });
});

describe.skipIf(!pgUrl)("PostgreSQL commit feed: what a batch announces", () => {
  it("sends no NOTIFY for a batch that changed nothing", async () => {
    const hosts = await openHosts();
    const { a, schema } = hosts;
    const listener = new pg.Client({ connectionString: pgUrl! });
    const heard: string[] = [];
    listener.on("notification", (message) => heard.push(message.payload ?? ""));
    await listener.connect();
    try {
      await listener.query(`LISTEN "sessionmux_${schema}"`);
      const created = await a.create({ sessionId: S, owner: "o", model: "m" });
      await vi.waitFor(() => expect(heard).toHaveLength(1), WAIT);
      expect(created.status).toBe("created");
      // refused: the batch commits nothing
      expect((await a.append(S, [delta("t", "late")], { expectedEpoch: "another" })).status).toBe(
        "epoch_mismatch",
      );
      await a.append(S, [delta("t", "two")]);
      // one connection's NOTIFYs arrive in the order sent: one for the refused batch would come first
      await vi.waitFor(() => expect(heard).toHaveLength(2), WAIT);
      expect(JSON.parse(heard[1]!)).toMatchObject({ c: [[S, "append", expect.any(String), 2, 2]] });
    } finally {
      await listener.end();
    }
  });
});
