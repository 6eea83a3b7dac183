import { afterEach, describe, expect, it, vi } from "vitest";
import type { LiveStateNotice } from "../../../src/store/live-state-store.js";
import { PgLiveFeed } from "../../../src/store/postgres/pg-live-feed.js";
import { PgReads } from "../../../src/store/postgres/pg-reads.js";
import type { CommitNotice, SessionProjection } from "../../../src/store/session-store.js";
import { pgUrl } from "../contract/backends.js";
import { delta, turnEnd, turnStart, userMessage } from "../open-store.js";
import { notifiesHandled, twoHostsFixture } from "./two-hosts.js";

/**
 * What a host (B) hears of another host's (A) commits, by kind of listener: a host reads another
 * host's rows only for sessions someone on it follows (or for everything while a store-wide
 * listener is there), so how it counts its listeners decides what they are told.
 */
const openHosts = twoHostsFixture("feed");
const WAIT = { timeout: 20_000 };

function seqsOf(notices: CommitNotice[]): number[] {
  return notices.flatMap((n) =>
    n.kind === "append" || n.kind === "create" ? n.events.map((e) => e.seq) : [],
  );
}

afterEach(() => {
  vi.restoreAllMocks();
});

describe.skipIf(!pgUrl)("PostgreSQL commit feed: listeners on another host", () => {
  it("one of two subscribers leaving (twice) leaves the other hearing every commit", async () => {
    const { a, b } = await openHosts();
    await a.create({ sessionId: "s", owner: "o", model: "m" });
    const staying: CommitNotice[] = [];
    const leaving: CommitNotice[] = [];
    b.subscribe("s", (n) => staying.push(n));
    const leave = b.subscribe("s", (n) => leaving.push(n));
    await a.append("s", [delta("t", "both")]);
    await vi.waitFor(() => expect(seqsOf(leaving)).toContain(2), WAIT);
    leave();
    leave();
    await a.append("s", [delta("t", "one")]);
    await vi.waitFor(() => expect(seqsOf(staying).at(-1)).toBe(3), WAIT);
    expect(seqsOf(leaving).at(-1)).toBe(2);
  });

  it("a subscriber that read the log itself hears only what was committed after it subscribed", async () => {
    const { a, b } = await openHosts();
    await a.create({ sessionId: "s", owner: "o", model: "m" });
    for (const text of ["one", "two", "three"]) await a.append("s", [delta("t", text)]);
    // wait until B has handled those NOTIFYs (nobody on B followed "s": it read nothing)
    await notifiesHandled({ a, b });
    const heard: CommitNotice[] = [];
    b.subscribe("s", (n) => heard.push(n));
    await a.append("s", [delta("t", "four")]);
    await vi.waitFor(() => expect(seqsOf(heard)).toEqual([5]), WAIT);
  });

  it("a store-wide listener hears sessions nobody follows, with their rows; one of two leaving (twice) changes nothing for the other", async () => {
    const { a, b } = await openHosts();
    const staying: [string, CommitNotice, SessionProjection | null][] = [];
    const leaving: string[] = [];
    b.subscribeAll((sessionId, notice, projection) => staying.push([sessionId, notice, projection]));
    const leave = b.subscribeAll((sessionId) => leaving.push(sessionId));
    await a.create({ sessionId: "first", owner: "o", model: "m" });
    await vi.waitFor(() => expect(leaving).toContain("first"), WAIT);
    leave();
    leave();
    await a.create({ sessionId: "s", owner: "o", model: "m", title: "a title" });
    await a.append("s", [turnStart("t1"), userMessage("hi"), turnEnd("t1")]);
    await vi.waitFor(
      () => expect(seqsOf(staying.filter(([id]) => id === "s").map(([, n]) => n)).at(-1)).toBe(4),
      WAIT,
    );
    const last = staying.filter(([id]) => id === "s").at(-1);
    expect(last?.[2]).toMatchObject({
      sessionId: "s",
      title: "a title",
      lastState: "completed",
      turnCount: 1,
    });
    expect(leaving).not.toContain("s");
  });

  it("once the last listener of each kind left, B reads nothing of A's commits", async () => {
    const { a, b } = await openHosts();
    await a.create({ sessionId: "s", owner: "o", model: "m" });
    const leave = [
      b.subscribe("s", () => undefined),
      b.subscribe("s", () => undefined),
      b.subscribeAll(() => undefined),
      b.subscribeLive(() => undefined),
    ];
    const heard: CommitNotice[] = [];
    const still = b.subscribe("s", (n) => heard.push(n));
    await a.append("s", [delta("t", "followed")]);
    await vi.waitFor(() => expect(seqsOf(heard)).toContain(2), WAIT);
    for (const unsubscribe of [...leave, still]) unsubscribe();
    const readsOfS = vi.spyOn(PgReads.prototype, "readAfter");
    const rowReads = vi.spyOn(PgReads.prototype, "projection");
    const liveReads = vi.spyOn(PgLiveFeed.prototype, "remote");
    await a.append("s", [delta("t", "nobody follows")]);
    await a.enqueuePrompt({ sessionId: "s", itemId: "q1", queuedAt: 1, input: { text: "queued" } });
    // B handles NOTIFYs in order: once it delivered the probe's, it had handled those of "s"
    await notifiesHandled({ a, b });
    expect(readsOfS.mock.calls.filter(([sessionId]) => sessionId === "s")).toEqual([]);
    expect(rowReads).not.toHaveBeenCalled();
    expect(liveReads).not.toHaveBeenCalled();
  });

  it("an append and a delete committed together reach B's subscriber as one delete", async () => {
    const { a, b } = await openHosts();
    await a.create({ sessionId: "s", owner: "o", model: "m" });
    const heard: CommitNotice[] = [];
    b.subscribe("s", (n) => heard.push(n));
    await a.append("s", [delta("t", "first")]);
    await vi.waitFor(() => expect(seqsOf(heard)).toContain(2), WAIT);
    // one transaction, one NOTIFY naming both: reading the append finds the session deleted
    await Promise.all([a.append("s", [delta("t", "last")]), a.delete("s")]);
    await vi.waitFor(() => expect(heard.at(-1)?.kind).toBe("delete"), WAIT);
    // the probe's notice comes after every notice of that NOTIFY
    await notifiesHandled({ a, b });
    expect(heard.filter((n) => n.kind === "delete")).toHaveLength(1);
  });

  it("an ack on A reaches B's subscribers as a meta notice, with the row for a store-wide listener", async () => {
    const { a, b } = await openHosts();
    await a.create({ sessionId: "s", owner: "o", model: "m" });
    await a.append("s", [turnStart("t1"), userMessage("hi"), turnEnd("t1")]);
    const row = await a.projection("s");
    const settledAt = row?.completionSettledAt;
    if (settledAt === null || settledAt === undefined) throw new Error("no settled completion");
    const heard: CommitNotice[] = [];
    const rows: [CommitNotice["kind"], SessionProjection | null][] = [];
    b.subscribe("s", (n) => heard.push(n));
    b.subscribeAll((sessionId, notice, projection) => {
      if (sessionId === "s") rows.push([notice.kind, projection]);
    });
    await a.ack("s", settledAt);
    await vi.waitFor(() => expect(heard.map((n) => n.kind)).toContain("meta"), WAIT);
    expect(rows.find(([kind]) => kind === "meta")?.[1]).toMatchObject({
      sessionId: "s",
      hasUnseenCompletion: false,
    });
  });

  it("an append after a remote ack reaches B's subscriber alone, not with the log before it", async () => {
    const { a, b } = await openHosts();
    await a.create({ sessionId: "s", owner: "o", model: "m" });
    await a.append("s", [turnStart("t1"), userMessage("hi"), turnEnd("t1")]);
    const settledAt = (await a.projection("s"))?.completionSettledAt;
    if (settledAt === null || settledAt === undefined) throw new Error("no settled completion");
    // B's subscriber read seqs 1..4 itself (B handled their NOTIFY before it came); an ack moves no head
    await notifiesHandled({ a, b });
    const heard: CommitNotice[] = [];
    b.subscribe("s", (n) => heard.push(n));
    await a.ack("s", settledAt);
    await vi.waitFor(() => expect(heard.map((n) => n.kind)).toContain("meta"), WAIT);
    await a.append("s", [delta("t2", "after the ack")]);
    await vi.waitFor(() => expect(seqsOf(heard)).toContain(5), WAIT);
    expect(seqsOf(heard)).toEqual([5]);
  });

  it("a delete right after a clear B delivered reaches B's subscriber", async () => {
    const { a, b } = await openHosts();
    await a.create({ sessionId: "s", owner: "o", model: "m" });
    const heard: CommitNotice[] = [];
    b.subscribe("s", (n) => heard.push(n));
    await a.append("s", [delta("t", "before the clear")]);
    await vi.waitFor(() => expect(seqsOf(heard)).toContain(2), WAIT);
    await a.clear("s");
    await vi.waitFor(() => expect(heard.map((n) => n.kind)).toContain("clear"), WAIT);
    await a.delete("s");
    await vi.waitFor(() => expect(heard.map((n) => n.kind).at(-1)).toBe("delete"), WAIT);
    expect(heard.filter((n) => n.kind === "delete")).toHaveLength(1);
  });

  it("one of two live-state listeners leaving (twice) leaves the other hearing A's queue changes", async () => {
    const { a, b } = await openHosts();
    await a.create({ sessionId: "s", owner: "o", model: "m" });
    const staying: LiveStateNotice[] = [];
    const leaving: LiveStateNotice[] = [];
    b.subscribeLive((n) => staying.push(n));
    const leave = b.subscribeLive((n) => leaving.push(n));
    await a.enqueuePrompt({ sessionId: "s", itemId: "q1", queuedAt: 1, input: { text: "one" } });
    await vi.waitFor(() => expect(leaving).toHaveLength(1), WAIT);
    leave();
    leave();
    await a.enqueuePrompt({ sessionId: "s", itemId: "q2", queuedAt: 2, input: { text: "two" } });
    await vi.waitFor(() => expect(staying).toHaveLength(2), WAIT);
    expect(staying.at(-1)).toMatchObject({
      kind: "queue",
      sessionId: "s",
      items: [{ itemId: "q1" }, { itemId: "q2" }],
    });
    expect(leaving).toHaveLength(1);
  });
});
