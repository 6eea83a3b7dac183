import { afterEach, describe, expect, it, vi } from "vitest";
import type { NewEvent } from "../../../protocol/index.js";
import { MAX_OWED_HELD, OWED_HOLD_MS } from "../../../src/store/postgres/pg-commit-feed.js";
import { PgReads } from "../../../src/store/postgres/pg-reads.js";
import type { PostgresSessionStore } from "../../../src/store/postgres/postgres-store.js";
import type { CommitNotice } from "../../../src/store/session-store.js";
import { pgUrl } from "../contract/backends.js";
import { delta, turnEnd, turnStart } from "../open-store.js";
import { holdNotices } from "./held-notices.js";
import { gateListenConnects, listensAgain } from "./listen-connects.js";
import { notifiesHandled, type TwoHosts, twoHostsFixture } from "./two-hosts.js";

/**
 * A local commit of a session that overtook another host's rows not read yet waits for a read of
 * them; when that read fails (its connection ended), the rows are owed as a failed NOTIFY's are:
 * the host listens again, and its local notices wait for that reconnect's re-read, so no listener
 * here, store-wide ones included, misses the other host's rows. Bounded: past `MAX_OWED_HELD`
 * notices or `OWED_HOLD_MS` they go out as they are.
 */
const openHosts = twoHostsFixture("feed_owed_hold");
const WAIT = { timeout: 20_000 };
const S = "s";

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

/** `append 3`, `append 3..5`, `delete`, … */
function note(notice: CommitNotice): string {
  if (notice.kind !== "append" && notice.kind !== "create") return notice.kind;
  const first = notice.events[0]?.seq;
  const last = notice.events.at(-1)?.seq;
  return first === last ? `${notice.kind} ${first}` : `${notice.kind} ${first}..${last}`;
}

/** The seqs of the events a notice carries. */
const seqsIn = (notice: CommitNotice) =>
  notice.kind === "append" || notice.kind === "create" ? notice.events.map((e) => e.seq) : [];

/** What a subscriber of S on `store` hears until `leave()`: each notice, and the seqs of their events. */
function follow(store: PostgresSessionStore) {
  const heard: string[] = [];
  const seqs: number[] = [];
  const leave = store.subscribe(S, (notice) => {
    heard.push(note(notice));
    seqs.push(...seqsIn(notice));
  });
  return { heard, seqs, leave };
}

/**
 * Fails B's first catch-up read of S after 2 (as a lost connection does), once `fail()` was
 * called; `failed()` once it did.
 */
function failReadOnce() {
  let fail!: () => void;
  const failing = new Promise<void>((resolve) => {
    fail = resolve;
  });
  let failed = false;
  const readAfter = PgReads.prototype.readAfter;
  vi.spyOn(PgReads.prototype, "readAfter").mockImplementation(async function (
    this: PgReads,
    id,
    after,
    limit,
  ) {
    if (id === S && after === 2 && !failed) {
      await failing;
      failed = true;
      throw new Error("Connection terminated unexpectedly");
    }
    return readAfter.call(this, id, after, limit);
  });
  return { fail, failed: () => failed };
}

/**
 * A's append 3 (`events`), whose NOTIFY B holds back (`notices.release()`), then B's own 4,
 * which waits for a read of 3; B's LISTEN connection cannot come back until `openConnects()`.
 * `beforeFailing` runs once 4 is held, before that read fails.
 */
async function heldBehindFailedRead(
  { a, b }: Pick<TwoHosts, "a" | "b">,
  {
    events = [delta("t", "a3")],
    beforeFailing = () => {},
  }: { events?: NewEvent[]; beforeFailing?: () => void } = {},
) {
  const notices = holdNotices(b);
  const read = failReadOnce();
  const gate = gateListenConnects();
  await a.append(S, events);
  expect(await b.append(S, [delta("t", "b4")])).toMatchObject({ status: "appended", events: [{ seq: 4 }] });
  beforeFailing();
  read.fail();
  // (setImmediate is never faked here)
  while (!read.failed()) await new Promise((resolve) => setImmediate(resolve));
  return { notices, openConnects: gate.openConnects, connecting: gate.connecting };
}

/**
 * Stretches the feed's time bound (`OWED_HOLD_MS`) out of reach, for a case about its count bound:
 * a loaded machine may take longer than the time bound for the commits that reach the count.
 */
function timeBoundOutOfReach() {
  const realSetTimeout = globalThis.setTimeout;
  vi.spyOn(globalThis, "setTimeout").mockImplementation(((run: () => void, ms?: number, ...args: unknown[]) =>
    realSetTimeout(run, ms === OWED_HOLD_MS ? 2 ** 31 - 1 : ms, ...args)) as typeof setTimeout);
}

/** Two hosts; S created on A with a turn started (seq 2), both delivered by B to a follower of S. */
async function followedOnB() {
  const hosts = await openHosts();
  const follower = follow(hosts.b);
  await hosts.a.create({ sessionId: S, owner: "o", model: "m" });
  await hosts.a.append(S, [turnStart("t")]);
  await vi.waitFor(() => expect(follower.seqs).toEqual([1, 2]), WAIT);
  follower.heard.splice(0);
  follower.seqs.splice(0);
  return { ...hosts, ...follower };
}

/** Resolves once B delivered a commit A makes now to S (`seq`): B listens again. */
async function hearsAgain({ a, heard }: { a: PostgresSessionStore; heard: string[] }, seq: number) {
  await a.append(S, [delta("t", "from A")]);
  await vi.waitFor(() => expect(heard.at(-1)).toBe(`append ${seq}`), WAIT);
}

describe.skipIf(!pgUrl)("PostgreSQL commit feed: a local commit held behind a read that failed", () => {
  it("gives a store-wide listener another host's failed turn before the local commit that overtook it, each once", async () => {
    const hosts = await followedOnB();
    const told: { note: string; remote: boolean; failed: boolean }[] = [];
    const seqs: number[] = [];
    hosts.b.subscribeAll((sessionId, notice) => {
      if (sessionId !== S) return;
      const events = notice.kind === "append" || notice.kind === "create" ? notice.events : [];
      seqs.push(...seqsIn(notice));
      told.push({
        note: note(notice),
        remote: "remote" in notice && notice.remote === true,
        failed: events.some((e) => e.type === "turn/end" && e.data.state === "failed"),
      });
    });
    // only the store-wide listener follows S on B
    hosts.leave();
    const { notices, openConnects } = await heldBehindFailedRead(hosts, { events: [turnEnd("t", "failed")] });
    expect(told).toEqual([]);
    openConnects();
    await vi.waitFor(() => expect(seqs.at(-1)).toBe(4), WAIT);
    notices.release();
    await notifiesHandled(hosts);
    // the failed `turn/end` (3) as another host's, so the host tells it as `agent.error`; 4 as B's own
    expect(told).toEqual([
      { note: "append 3", remote: true, failed: true },
      { note: "append 4", remote: false, failed: false },
    ]);
  });

  it("sends the held commits as they are once they are more than the bound, the LISTEN still out", async () => {
    const hosts = await followedOnB();
    const { b, heard, seqs } = hosts;
    const { notices, openConnects } = await heldBehindFailedRead(hosts, {
      beforeFailing: timeBoundOutOfReach,
    });
    // B's 5.. join 4: the bound's worth held, nothing sent
    for (let n = 1; n < MAX_OWED_HELD; n++) await b.append(S, [delta("t", `b${4 + n}`)]);
    expect(heard).toEqual([]);
    // one more, and all go out, 3 skipped (a follower reads it from the log)
    await b.append(S, [delta("t", "past the bound")]);
    const last = 4 + MAX_OWED_HELD;
    expect(heard).toHaveLength(MAX_OWED_HELD + 1);
    expect(seqs).toEqual(Array.from({ length: MAX_OWED_HELD + 1 }, (_, i) => 4 + i));
    // the next goes out at once; the reconnect and the NOTIFY of 3 deliver nothing more
    await b.append(S, [delta("t", "after")]);
    expect(heard.at(-1)).toBe(`append ${last + 1}`);
    openConnects();
    notices.release();
    await hearsAgain(hosts, last + 2);
    expect(heard).toHaveLength(MAX_OWED_HELD + 3);
    // a thousand commits one after another: 10 s on a loaded machine, more under a full test run
  }, 120_000);

  it(`sends the held commits as they are ${OWED_HOLD_MS} ms after the read failed, the LISTEN still out`, async () => {
    const hosts = await followedOnB();
    const { heard } = hosts;
    const { notices, openConnects } = await heldBehindFailedRead(hosts, {
      beforeFailing: () => vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] }),
    });
    vi.advanceTimersByTime(OWED_HOLD_MS - 1);
    expect(heard).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(heard).toEqual(["append 4"]);
    vi.useRealTimers();
    openConnects();
    notices.release();
    await hearsAgain(hosts, 5);
    expect(heard).toEqual(["append 4", "append 5"]);
  });

  it("sends the held commits as they are when the store closes", async () => {
    const hosts = await followedOnB();
    const { heard } = hosts;
    const { openConnects, connecting } = await heldBehindFailedRead(hosts);
    await vi.waitFor(() => expect(connecting).toHaveLength(1), WAIT);
    const closing = hosts.b.close();
    openConnects();
    await closing;
    expect(heard).toEqual(["append 4"]);
  });

  it("drops the held commits of a session nobody follows any more, and holds none of its next commit", async () => {
    const hosts = await followedOnB();
    const { b, heard, leave, schema } = hosts;
    const { notices, openConnects } = await heldBehindFailedRead(hosts);
    leave();
    const listening = listensAgain(`sessionmux_${schema}`);
    openConnects();
    await listening;
    notices.release();
    // B handled a NOTIFY heard on its new connection: its re-read, and what came after, are done
    await notifiesHandled(hosts);
    // a new follower hears B's next commit at once, after the rows it overtook
    const next = follow(b);
    await b.append(S, [delta("t", "b5")]);
    await vi.waitFor(() => expect(next.heard).toEqual(["append 3..4", "append 5"]), WAIT);
    expect(heard).toEqual([]);
  });

  it("drops the held commits of a session another host cleared meanwhile, telling the clear once", async () => {
    const hosts = await followedOnB();
    const { a, b, heard } = hosts;
    // (the turn ends with 3: a session is cleared between turns)
    const { notices, openConnects } = await heldBehindFailedRead(hosts, { events: [turnEnd("t")] });
    expect(await a.clear(S)).toMatchObject({ status: "cleared" });
    await a.append(S, [delta("t", "new epoch")]);
    openConnects();
    await vi.waitFor(() => expect(heard.at(-1)).toBe("append 1"), WAIT);
    notices.release();
    await notifiesHandled(hosts);
    await b.append(S, [delta("t", "b2")]);
    expect(heard).toEqual(["clear", "append 1", "append 2"]);
  });

  it("drops the held commits of a session another host deleted meanwhile", async () => {
    const hosts = await followedOnB();
    const { heard } = hosts;
    const { notices, openConnects } = await heldBehindFailedRead(hosts);
    await hosts.a.delete(S);
    openConnects();
    await vi.waitFor(() => expect(heard.at(-1)).toBe("delete"), WAIT);
    notices.release();
    await notifiesHandled(hosts);
    expect(heard).toEqual(["delete"]);
  });
});
