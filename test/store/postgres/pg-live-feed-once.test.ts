import type pg from "pg";
import { afterEach, describe, expect, it, vi } from "vitest";
import { CommitListeners } from "../../../src/store/commit-listeners.js";
import type { LiveStateNotice } from "../../../src/store/live-state-store.js";
import { PgLiveFeed } from "../../../src/store/postgres/pg-live-feed.js";
import { PgLiveReads } from "../../../src/store/postgres/pg-live-rows.js";
import { hintsOf } from "../../../src/store/postgres/pg-notice-payload.js";
import { openPool } from "../../../src/store/postgres/pg-pool.js";
import type { PgLiveNotice } from "../../../src/store/postgres/pg-write-batch.js";
import type { PostgresSessionStore } from "../../../src/store/postgres/postgres-store.js";
import { UNDO_PG_LOG_KEYS } from "../../support/purge-migration.js";
import { backends, pgUrl, storeFixture } from "../contract/backends.js";
import { turnEnd, turnStart } from "../open-store.js";
import { listenWatermark } from "./listen-watermark.js";

/**
 * Host B's live feed on the schema host A writes, driven by hand: B hears exactly the hints the
 * test hands it (those A's commits would NOTIFY, in the order the test says), its own commits'
 * notices (A's, replayed as B's), and re-reads everything when told, as after a LISTEN outage.
 * So a late, repeated or missing NOTIFY, and a re-read racing one, land where the test wants.
 */
const describePg = pgUrl ? describe : describe.skip;
const postgres = backends.find((backend) => backend.name === "postgres");
const S = "s";

const ask = (turnId: string, interactionId: string) => ({
  type: "interaction/requested" as const,
  data: { turnId, interactionId, kind: "approval" as const, action: "deploy" },
});

describePg("PostgreSQL live feed: each change announced once, whichever way it came", () => {
  const open = storeFixture(postgres!);
  const pools: pg.Pool[] = [];
  afterEach(async () => {
    vi.restoreAllMocks();
    await Promise.all(pools.splice(0).map((pool) => pool.end()));
  });

  /** Store `a`, and a feed `b` of another host on its schema that hears only what it is handed. */
  async function hosts() {
    const under = await open();
    const pool = openPool(pgUrl!, { schema: under.schema!, max: 2 });
    pools.push(pool);
    const listeners = new CommitListeners();
    const heard: LiveStateNotice[] = [];
    listeners.subscribeLive((notice) => heard.push(notice));
    const commits: unknown[] = [];
    listeners.subscribeAll((sessionId, notice) => commits.push({ sessionId, notice }));
    const b = new PgLiveFeed(listeners, new PgLiveReads(pool));
    // every notice a's commits hand its own feed: the input of a NOTIFY, or of `local` on a host
    const local = vi.spyOn(PgLiveFeed.prototype, "local");
    let taken = 0;
    /** a's live notices since the last call (the commits of one step). */
    const made = (): PgLiveNotice[] => {
      const calls = local.mock.calls.filter((_, i) => local.mock.contexts[i] !== b);
      const since = calls.slice(taken).flatMap(([notices]) => notices);
      taken = calls.length;
      return since;
    };
    const queueReads = vi.spyOn(PgLiveReads.prototype, "versionedQueue");
    await under.store.create({ sessionId: S, owner: "alice", model: "m" });
    made();
    return { a: under.store, b, heard, commits, made, queueReads, pool };
  }

  it("reads and announces nothing for a queue hint the re-read already announced, nor for a late one", async () => {
    const { a, b, heard, made, queueReads } = await hosts();
    await a.enqueuePrompt({ sessionId: S, itemId: "q1", queuedAt: 1, input: { text: "one" } });
    const first = hintsOf(made());
    await a.editQueueItem(S, "q1", "uno");
    const second = hintsOf(made());
    expect(second).toEqual([{ kind: "queue", sessionId: S, version: 2 }]);
    await b.rereadAll();
    expect(heard).toEqual([
      { kind: "queue", sessionId: S, owner: "alice", items: [expect.objectContaining({ itemId: "q1" })] },
    ]);
    const reads = queueReads.mock.calls.length;
    // the NOTIFYs of both changes come after the re-read that saw the second
    await b.remote(first);
    await b.remote(second);
    expect(heard).toHaveLength(1);
    expect(queueReads.mock.calls.length).toBe(reads);
  });

  it("announces its own queue change once when a re-read saw it before the commit's notices went out", async () => {
    const { a, b, heard, made } = await hosts();
    await a.enqueuePrompt({ sessionId: S, itemId: "q1", queuedAt: 1, input: { text: "one" } });
    const own = made();
    await b.rereadAll();
    b.local(own);
    expect(heard.map((n) => n.kind)).toEqual(["queue"]);
  });

  it("reads nothing for another host's hint of a queue version this host announced itself", async () => {
    const { a, b, heard, made, queueReads } = await hosts();
    await a.enqueuePrompt({ sessionId: S, itemId: "q1", queuedAt: 1, input: { text: "one" } });
    const own = made();
    b.local(own);
    // a lease change of the same session, announced after it, leaves the queue's version known
    await a.acquireLease(S, "host-b", 60_000);
    b.local(made());
    expect(heard.map((n) => n.kind)).toEqual(["queue", "lease"]);
    const reads = queueReads.mock.calls.length;
    await b.remote(hintsOf(own));
    await b.rereadAll();
    expect(heard).toHaveLength(2);
    expect(queueReads.mock.calls.length).toBe(reads);
  });

  it("announces its own queue change once when it committed while a hint's read of that queue was out", async () => {
    const { a, b, heard, made, queueReads } = await hosts();
    await a.enqueuePrompt({ sessionId: S, itemId: "q1", queuedAt: 1, input: { text: "one" } });
    const hint = hintsOf(made());
    let release = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    queueReads.mockImplementationOnce(async function (this: PgLiveReads, sessionId: string) {
      await gate;
      // the spy's next call reads for real
      return PgLiveReads.prototype.versionedQueue.call(this, sessionId);
    });
    const reading = b.remote(hint);
    await vi.waitFor(() => expect(queueReads).toHaveBeenCalled(), { timeout: 20_000 });
    // this host's own edit commits and is announced before the read runs, which then sees it
    await a.editQueueItem(S, "q1", "uno");
    b.local(made());
    release();
    await reading;
    expect(heard).toEqual([
      { kind: "queue", sessionId: S, owner: "alice", items: [expect.objectContaining({ itemId: "q1" })] },
    ]);
    expect(heard[0]).toMatchObject({ items: [{ input: { text: "uno" } }] });
  });

  it("after an outage reads again only the questions it announced that are no longer pending", async () => {
    const { a, b, heard, made } = await hosts();
    await a.append(S, [turnStart("t1"), ask("t1", "i1"), ask("t1", "i2"), ask("t1", "i3")]);
    await b.remote(hintsOf(made()));
    await a.resolveInteraction("i2", { outcome: "approve" });
    await b.remote(hintsOf(made()));
    await a.resolveInteraction("i3", { outcome: "deny" });
    made();
    const reads = vi.spyOn(PgLiveReads.prototype, "interaction");
    await b.rereadAll();
    // i1 is still pending (the re-read's list says so), i2's answer was announced already
    expect(reads.mock.calls).toEqual([["i3"]]);
    expect(heard.map((n) => n.kind)).toEqual([
      "interaction.requested",
      "interaction.requested",
      "interaction.requested",
      "interaction.resolved",
      "interaction.resolved",
    ]);
    expect(heard.at(-1)).toMatchObject({ interactionId: "i3" });
  });

  it("after an outage announces an answer to a question it announced but no longer remembers, and no older answer", async () => {
    const { a, b, heard, made, pool } = await hosts();
    await a.append(S, [turnStart("t1"), ask("t1", "i0"), ask("t1", "i1")]);
    await b.remote(hintsOf(made()));
    await a.resolveInteraction("i0", { outcome: "deny" });
    await b.remote(hintsOf(made()));
    const asked = heard.find((n) => n.kind === "interaction.requested");
    if (asked?.kind !== "interaction.requested") throw new Error("no question announced");
    // B's LISTEN began here (its watermark); B misses the NOTIFYs of what commits after
    const since = await listenWatermark(pool);
    // 50,000 questions asked and withdrawn on B since push i0 and i1 out of its bounded memory
    for (let i = 0; i < 50_000; i++) {
      const interaction = { ...asked.interaction, interactionId: `other-${i}` };
      b.local([
        { notice: { kind: "interaction.requested", owner: "alice", interaction } },
        {
          notice: {
            kind: "interaction.withdrawn",
            owner: "alice",
            sessionId: S,
            interactionId: `other-${i}`,
          },
        },
      ]);
    }
    heard.length = 0;
    await a.resolveInteraction("i1", { outcome: "approve" });
    made();
    await b.rereadAll(since);
    // announced afresh from the row (the question again, then its answer); i0's answer is older
    expect(heard).toEqual([
      {
        kind: "interaction.requested",
        owner: "alice",
        interaction: expect.objectContaining({ interactionId: "i1" }),
      },
      expect.objectContaining({
        kind: "interaction.resolved",
        interactionId: "i1",
        resolution: { outcome: "approve" },
      }),
    ]);
  });

  it("after an outage announces every question settled meanwhile when they are more than one page of the re-read", async () => {
    const { a, b, heard, made, pool } = await hosts();
    const since = await listenWatermark(pool);
    // the turn's end withdraws its 501 open questions, in one transaction B does not hear of
    // ids that sort before any letter: a first page read from anything but the start would miss some
    const asks = Array.from({ length: 501 }, (_, i) => ask("t1", `${String(i).padStart(3, "0")}-i`));
    await a.append(S, [turnStart("t1"), ...asks, turnEnd("t1")]);
    made();
    await b.rereadAll(since);
    const withdrawn = heard.flatMap((n) => (n.kind === "interaction.withdrawn" ? [n.interactionId] : []));
    expect(withdrawn).toEqual(asks.map((event) => event.data.interactionId));
  });

  it("after an outage announces every pending question a page at a time, each session's in the order asked", async () => {
    const { a, b, heard, made } = await hosts();
    await a.create({ sessionId: "r", owner: "alice", model: "m" });
    await a.append(S, [turnStart("t1")]);
    await a.append("r", [turnStart("t1")]);
    // 600 questions in three rounds; a later round's ids sort before an earlier one's
    const asked: Record<string, string[]> = { r: [], [S]: [] };
    for (const [round, at] of [1_000, 2_000, 3_000].entries())
      for (const sessionId of [S, "r"]) {
        const ids = Array.from({ length: 100 }, (_, i) => `${sessionId}-${9 - round}-${100 + i}`);
        asked[sessionId]!.push(...ids);
        await a.append(
          sessionId,
          ids.map((id) => ask("t1", id)),
          { at },
        );
      }
    made();
    const pages = vi.spyOn(PgLiveReads.prototype, "pendingInteractions");
    await b.rereadAll();
    const requested = heard.flatMap((n) =>
      n.kind === "interaction.requested" ? [n.interaction.interactionId] : [],
    );
    expect(requested).toEqual([...asked.r!, ...asked[S]!]);
    const sizes = await Promise.all(pages.mock.results.map(async (result) => (await result.value).length));
    expect(sizes).toEqual([500, 100]);

    // one question answered in each page: only those two are read on their own after the next outage
    await a.resolveInteraction(asked.r![7]!, { outcome: "approve" });
    await a.resolveInteraction(asked[S]![250]!, { outcome: "deny" });
    made();
    const reads = vi.spyOn(PgLiveReads.prototype, "interaction");
    heard.length = 0;
    await b.rereadAll();
    expect(reads.mock.calls.map(([id]) => id).sort()).toEqual([asked.r![7], asked[S]![250]].sort());
    expect(heard.map((n) => n.kind === "interaction.resolved" && n.interactionId)).toEqual([
      asked.r![7],
      asked[S]![250],
    ]);
  });

  it("after an outage announces a pending question of a session whose id sorts before any letter", async () => {
    const { a, b, heard, made } = await hosts();
    await a.create({ sessionId: "0-first", owner: "bob", model: "m" });
    await a.append("0-first", [turnStart("t1"), ask("t1", "i0")]);
    await a.append(S, [turnStart("t1"), ask("t1", "i1")]);
    made();
    await b.rereadAll();
    expect(heard).toEqual([
      {
        kind: "interaction.requested",
        owner: "bob",
        interaction: expect.objectContaining({ interactionId: "i0" }),
      },
      {
        kind: "interaction.requested",
        owner: "alice",
        interaction: expect.objectContaining({ interactionId: "i1" }),
      },
    ]);
  });

  it("after an outage reads only the queues changed since the previous LISTEN, a page at a time", async () => {
    const { a, b, heard, made, pool, queueReads } = await hosts();
    await a.enqueuePrompt({ sessionId: S, itemId: "q0", queuedAt: 1, input: { text: "before" } });
    await b.remote(hintsOf(made()));
    // 50,000 queues announced on B since push S's out of its bounded memory
    for (let i = 0; i < 50_000; i++)
      b.local([
        { notice: { kind: "queue", sessionId: `other-${i}`, owner: "alice", items: [] }, queueVersion: 1 },
      ]);
    heard.length = 0;
    const since = await listenWatermark(pool);
    const ids = Array.from({ length: 501 }, (_, i) => `q${String(i).padStart(3, "0")}`);
    await Promise.all(ids.map((sessionId) => a.create({ sessionId, owner: "alice", model: "m" })));
    await Promise.all(
      ids.map((sessionId) =>
        a.enqueuePrompt({ sessionId, itemId: "q1", queuedAt: 1, input: { text: "while out" } }),
      ),
    );
    made();
    queueReads.mockClear();
    await b.rereadAll(since);
    expect(heard.map((n) => n.kind === "queue" && n.sessionId)).toEqual(ids);
    expect(queueReads.mock.calls.map(([sessionId]) => sessionId)).toEqual(ids);
  });

  it("announces the emptied queue of a session another host deleted once, from its hint, and the delete leaves no queue version", async () => {
    const { a, b, heard, made, pool } = await hosts();
    await a.enqueuePrompt({ sessionId: S, itemId: "q1", queuedAt: 1, input: { text: "one" } });
    await b.remote(hintsOf(made()));
    heard.length = 0;
    await a.delete(S);
    const hints = hintsOf(made());
    await b.remote(hints);
    expect(heard).toEqual([{ kind: "queue", sessionId: S, owner: "alice", items: [] }]);
    const versions = await pool.query("SELECT version FROM queue_versions WHERE session_id = $1", [S]);
    expect(versions.rows).toEqual([]);
    // the hint heard again, and a re-read of every queue, announce nothing more
    await b.remote(hints);
    await b.rereadAll();
    expect(heard).toHaveLength(1);
  });

  it("a database from before opens without the queue versions its deletes left behind, and keeps those of live sessions", async () => {
    const under = await open();
    for (const sessionId of ["gone", "kept"]) {
      await under.store.create({ sessionId, owner: "alice", model: "m" });
      await under.store.enqueuePrompt({ sessionId, itemId: "q1", queuedAt: 1, input: { text: "one" } });
    }
    await under.store.delete("gone");
    // the purge of the delete done: its steps lock the tables the schema is put back on below
    await (under.store as unknown as PostgresSessionStore).purgesSettled();
    // stopped, as a host of an earlier build must be before a migration past 16 (see `refuseBesideHosts`)
    await under.store.close();
    const pool = openPool(pgUrl!, { schema: under.schema!, max: 1 });
    pools.push(pool);
    // the row an earlier build's delete left, in the schema before the migration
    await pool.query("INSERT INTO queue_versions (session_id, version) VALUES ('gone', 2)");
    await pool.query(`${UNDO_PG_LOG_KEYS} DELETE FROM schema_migrations WHERE version >= 15`);
    await under.openAnother();
    const { rows } = await pool.query("SELECT session_id FROM queue_versions ORDER BY session_id");
    expect(rows).toEqual([{ session_id: "kept" }]);
  });

  it("after an outage announces the emptied queue of a session deleted meanwhile once, and nothing of one it never announced", async () => {
    const { a, b, heard, made, pool } = await hosts();
    await a.create({ sessionId: "never-queued", owner: "alice", model: "m" });
    await a.enqueuePrompt({ sessionId: S, itemId: "q1", queuedAt: 1, input: { text: "one" } });
    await b.remote(hintsOf(made()));
    heard.length = 0;
    const since = await listenWatermark(pool);
    await a.delete(S);
    await a.delete("never-queued");
    made();
    await b.rereadAll(since);
    expect(heard).toEqual([{ kind: "queue", sessionId: S, owner: "alice", items: [] }]);
    await b.rereadAll(since);
    expect(heard).toHaveLength(1);
  });

  it("announces a lease taken, released and taken again once each, and neither a late nor a repeated notice of it", async () => {
    const { a, b, heard, made } = await hosts();
    const taken = await a.acquireLease(S, "host-a", 60_000);
    const hints = [hintsOf(made())];
    if (taken.status !== "acquired") throw new Error(`lease not acquired: ${taken.status}`);
    await a.releaseLease(taken.lease);
    hints.push(hintsOf(made()));
    expect(await a.acquireLease(S, "host-c", 60_000)).toMatchObject({ status: "acquired" });
    hints.push(hintsOf(made()));
    for (const batch of hints) await b.remote(batch);
    const lease = { kind: "lease", owner: "alice", sessionId: S };
    expect(heard).toEqual([
      { ...lease, hostId: "host-a", generation: 1 },
      { ...lease, hostId: null, generation: 1 },
      { ...lease, hostId: "host-c", generation: 2 },
    ]);
    // each NOTIFY heard again, oldest first, then a re-read of the lease held
    for (const batch of hints) await b.remote(batch);
    await b.rereadAll();
    expect(heard).toHaveLength(3);
  });

  it("does not announce the release of a lease once a later holder's lease was announced", async () => {
    const { a, b, heard, made } = await hosts();
    const taken = await a.acquireLease(S, "host-a", 60_000);
    if (taken.status !== "acquired") throw new Error(`lease not acquired: ${taken.status}`);
    await b.remote(hintsOf(made()));
    await a.releaseLease(taken.lease);
    const release = hintsOf(made());
    await a.acquireLease(S, "host-c", 60_000);
    // the re-read finds host-c's lease before the release's NOTIFY is handled
    await b.rereadAll();
    await b.remote(release);
    expect(heard.map((n) => n.kind === "lease" && n.hostId)).toEqual(["host-a", "host-c"]);
  });

  it("announces a question asked and answered before its first hint was handled once asked and once answered", async () => {
    const { a, b, heard, made } = await hosts();
    await a.append(S, [turnStart("t1"), ask("t1", "i1")]);
    const asked = hintsOf(made());
    await a.resolveInteraction("i1", { outcome: "approve" });
    const answered = hintsOf(made());
    await b.remote(asked);
    await b.remote(answered);
    await b.remote(asked);
    await b.rereadAll();
    expect(heard).toEqual([
      expect.objectContaining({ kind: "interaction.requested", owner: "alice" }),
      {
        kind: "interaction.resolved",
        owner: "alice",
        sessionId: S,
        interactionId: "i1",
        resolution: { outcome: "approve" },
      },
    ]);
  });

  it("announces a question of a session deleted while no NOTIFY was heard as withdrawn, in its session and for its owner", async () => {
    const { a, b, heard, made } = await hosts();
    await a.create({ sessionId: "other", owner: "bob", model: "m" });
    await a.append(S, [turnStart("t1"), ask("t1", "i1")]);
    await b.remote(hintsOf(made()));
    // a question this host asked itself: known from its own notice, not from a read
    await a.append("other", [turnStart("t2"), ask("t2", "i2")]);
    b.local(made());
    expect(heard.map((n) => n.kind)).toEqual(["interaction.requested", "interaction.requested"]);
    await a.delete(S);
    await a.delete("other");
    made();
    await b.rereadAll();
    expect(heard.slice(2)).toEqual(
      expect.arrayContaining([
        { kind: "interaction.withdrawn", owner: "alice", sessionId: S, interactionId: "i1" },
        { kind: "interaction.withdrawn", owner: "bob", sessionId: "other", interactionId: "i2" },
      ]),
    );
    expect(heard).toHaveLength(4);
    await b.rereadAll();
    await b.remote([
      { kind: "interaction", interactionId: "i1" },
      { kind: "interaction", interactionId: "i2" },
    ]);
    expect(heard).toHaveLength(4);
  });

  it("announces nothing for a hint of a question whose session was deleted before the hint was handled", async () => {
    const { a, b, heard, made } = await hosts();
    await a.append(S, [turnStart("t1"), ask("t1", "i1")]);
    const asked = hintsOf(made());
    await a.delete(S);
    await expect(b.remote(asked)).resolves.toBeUndefined();
    expect(heard).toEqual([]);
  });

  it("announces the answer to its own question given on another host while no NOTIFY was heard, without asking again", async () => {
    const { a, b, heard, made } = await hosts();
    await a.append(S, [turnStart("t1"), ask("t1", "i1")]);
    b.local(made());
    await a.resolveInteraction("i1", { outcome: "deny" });
    made();
    await b.rereadAll();
    expect(heard.map((n) => n.kind)).toEqual(["interaction.requested", "interaction.resolved"]);
    expect(heard[1]).toMatchObject({ owner: "alice", sessionId: S, resolution: { outcome: "deny" } });
  });

  it("does not announce again its own answer and withdrawal when it re-reads everything", async () => {
    const { a, b, heard, made } = await hosts();
    await a.append(S, [turnStart("t1"), ask("t1", "i1"), ask("t1", "i2")]);
    b.local(made());
    await a.resolveInteraction("i1", { outcome: "approve" });
    b.local(made());
    await a.append(S, [turnEnd("t1", "cancelled")]);
    b.local(made());
    expect(heard.map((n) => n.kind)).toEqual([
      "interaction.requested",
      "interaction.requested",
      "interaction.resolved",
      "interaction.withdrawn",
    ]);
    await b.rereadAll();
    expect(heard).toHaveLength(4);
  });

  it("re-reads everything for a batch whose hints did not fit its NOTIFY, telling live listeners alone", async () => {
    const { a, b, heard, commits } = await hosts();
    await a.enqueuePrompt({ sessionId: S, itemId: "q1", queuedAt: 1, input: { text: "one" } });
    await a.append(S, [turnStart("t1"), ask("t1", "i1")]);
    await a.acquireLease(S, "host-a", 60_000);
    await b.remote("all");
    expect(heard).toEqual([
      { kind: "queue", sessionId: S, owner: "alice", items: [expect.objectContaining({ itemId: "q1" })] },
      expect.objectContaining({ kind: "interaction.requested", owner: "alice" }),
      { kind: "lease", owner: "alice", sessionId: S, hostId: "host-a", generation: 1 },
    ]);
    // live state is no commit: a store-wide listener hears nothing of it
    expect(commits).toEqual([]);
  });

  it("announces every lease held after an outage when they are more than one page of the re-read", async () => {
    const { a, b, heard } = await hosts();
    // ids that sort before any letter: a first page read from anything but the start would miss some
    const ids = Array.from({ length: 501 }, (_, i) => `${String(i).padStart(3, "0")}-l`);
    await Promise.all(ids.map((sessionId) => a.create({ sessionId, owner: "alice", model: "m" })));
    const leases = await Promise.all(ids.map((sessionId) => a.acquireLease(sessionId, "host-a", 600_000)));
    expect(leases.every((lease) => lease.status === "acquired")).toBe(true);
    const pages = vi.spyOn(PgLiveReads.prototype, "leasePage");
    await b.rereadAll();
    const announced = heard.flatMap((n) => (n.kind === "lease" ? [n.sessionId] : []));
    expect(announced).toEqual(ids);
    // a page of 500, then the last one (short): no page read twice, none read after the last
    expect(pages.mock.calls.map(([after]) => after)).toEqual([null, ids[499]]);
  }, 60_000);
});
