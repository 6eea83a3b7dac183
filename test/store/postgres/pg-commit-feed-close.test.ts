import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";
import { afterEach, describe, expect, it, vi } from "vitest";
import { PgCommitFeed } from "../../../src/store/postgres/pg-commit-feed.js";
import { PgLiveFeed } from "../../../src/store/postgres/pg-live-feed.js";
import { PgReads } from "../../../src/store/postgres/pg-reads.js";
import { PostgresSessionStore } from "../../../src/store/postgres/postgres-store.js";
import type { CommitNotice } from "../../../src/store/session-store.js";
import { pgUrl } from "../contract/backends.js";
import { delta } from "../open-store.js";
import { gateListenConnects, isListenClient } from "./listen-connects.js";
import { refusableRole } from "./refusable-role.js";
import { twoHostsFixture } from "./two-hosts.js";

/**
 * How a host's feed ends: `close()` lets a catch-up read that is out finish before it ends the
 * connections, and ends a LISTEN connection a reconnect was still making; after an outage the host
 * reads only what someone on it listens to, and once closed it has no connection left open.
 */
const openHosts = twoHostsFixture("feed_close");
const WAIT = { timeout: 20_000 };
const S = "s";
/** Past the first two reconnect delays (each drawn below 100 ms, then below 200 ms). */
const PAST_SECOND_BACKOFF_MS = 400;

afterEach(() => {
  vi.restoreAllMocks();
});

/**
 * Two stores on one schema: `b` as a role the test can lock out, `a` as the database's own user;
 * `connections()` counts the role's (b's) open connections.
 */
async function refusableHosts() {
  const refusable = await refusableRole("smx_feed");
  const admin = new pg.Client({ connectionString: pgUrl! });
  const opened: PostgresSessionStore[] = [];
  const close = async () => {
    for (const store of opened) await store.close();
    await admin.end();
    await refusable.drop();
  };
  try {
    await admin.connect();
    // the schema's tables are the role's: `a` (a superuser) opens it once `b` created them
    const b = await PostgresSessionStore.open(refusable.url, { schema: refusable.schema, maxConnections: 2 });
    opened.push(b);
    const a = await PostgresSessionStore.open(pgUrl!, { schema: refusable.schema, maxConnections: 2 });
    opened.push(a);
    const connections = async () =>
      (
        await admin.query<{ n: number }>(
          "SELECT count(*)::int AS n FROM pg_stat_activity WHERE usename = $1",
          [refusable.role],
        )
      ).rows[0]!.n;
    return { a, b, refusable, connections, close };
  } catch (error) {
    await close();
    throw error;
  }
}

/** B's LISTEN connection cut, with every reconnect attempt held at a gate until `openConnects()`. */
async function firstReconnectHeld(refusable: { lockOut(): Promise<void> }) {
  const gate = gateListenConnects();
  await refusable.lockOut();
  // the LISTEN connection dropped: the first reconnect attempt waits at the gate
  await vi.waitFor(() => expect(gate.connecting).toHaveLength(1), WAIT);
  return gate;
}

describe.skipIf(!pgUrl)("PostgreSQL commit feed: closing", () => {
  it("lets a catch-up read that is out finish before it ends its LISTEN connection", async () => {
    const { a, b } = await openHosts();
    const seqs: number[] = [];
    b.subscribe(S, (notice: CommitNotice) => {
      if (notice.kind === "append" || notice.kind === "create") seqs.push(...notice.events.map((e) => e.seq));
    });
    await a.create({ sessionId: S, owner: "o", model: "m" });
    await vi.waitFor(() => expect(seqs).toEqual([1]), WAIT);

    const order: string[] = [];
    let openReads!: () => void;
    const gate = new Promise<void>((resolve) => {
      openReads = resolve;
    });
    let waiting = 0;
    const readAfter = PgReads.prototype.readAfter;
    vi.spyOn(PgReads.prototype, "readAfter").mockImplementation(async function (this: PgReads, ...args) {
      waiting++;
      await gate;
      const read = await readAfter.apply(this, args);
      order.push("read");
      return read;
    });
    const end = pg.Client.prototype.end;
    vi.spyOn(pg.Client.prototype, "end").mockImplementation(function (this: pg.Client, ...args: unknown[]) {
      if (isListenClient(this)) order.push("LISTEN connection ended");
      return (end as (...a: unknown[]) => unknown).apply(this, args);
    } as typeof pg.Client.prototype.end);
    // the feed's close has begun once this resolves (it ran up to its first wait)
    let closeBegun!: () => void;
    const begun = new Promise<void>((resolve) => {
      closeBegun = resolve;
    });
    const close = PgCommitFeed.prototype.close;
    vi.spyOn(PgCommitFeed.prototype, "close").mockImplementation(function (this: PgCommitFeed) {
      const closing = close.call(this);
      closeBegun();
      return closing;
    });

    await a.append(S, [delta("t", "two")]);
    await vi.waitFor(() => expect(waiting).toBe(1), WAIT);
    const closing = b.close();
    await begun;
    openReads();
    await closing;
    expect(order).toEqual(["read", "LISTEN connection ended"]);
    expect(seqs).toEqual([1, 2]);
  });

  it("ends a LISTEN connection that a reconnect was making when the host closed", async () => {
    const hosts = await refusableHosts();
    try {
      const { b, refusable, connections } = hosts;
      const { openConnects, connecting } = await firstReconnectHeld(refusable);
      await refusable.letIn();
      await b.close();
      openConnects();
      await connecting[0];
      // it connected after the close: the feed ends it as soon as it is made
      await expect.poll(connections, { timeout: 10_000, interval: 20 }).toBe(0);
    } finally {
      await hosts.close();
    }
  });

  it("makes one reconnect attempt for one dropped LISTEN connection, which reports both error and end", async () => {
    const hosts = await refusableHosts();
    try {
      const { b, refusable, connections } = hosts;
      const { openConnects, connecting } = await firstReconnectHeld(refusable);
      // a second attempt for the same drop would be due within two backoff steps (< 200 ms) of
      // the first; timers fire in the order they are due, so it would fire before this one
      await sleep(PAST_SECOND_BACKOFF_MS);
      expect(connecting).toHaveLength(1);
      await refusable.letIn();
      openConnects();
      await connecting[0];
      await expect.poll(() => refusable.listening(), { timeout: 10_000 }).toBe(true);
      expect(connecting).toHaveLength(1);
      await b.close();
      await expect.poll(connections, { timeout: 10_000, interval: 20 }).toBe(0);
    } finally {
      await hosts.close();
    }
  });

  it("tries no more reconnects once closed: an attempt refused after the close is the last", async () => {
    const hosts = await refusableHosts();
    try {
      const { b, refusable } = hosts;
      const ended: Promise<unknown>[] = [];
      const end = pg.Client.prototype.end;
      vi.spyOn(pg.Client.prototype, "end").mockImplementation(function (this: pg.Client, ...args: unknown[]) {
        const ending = (end as (...a: unknown[]) => Promise<unknown>).apply(this, args);
        if (isListenClient(this)) ended.push(ending);
        return ending;
      } as typeof pg.Client.prototype.end);
      const { openConnects, connecting } = await firstReconnectHeld(refusable);
      await b.close();
      // from here on a reconnect would be a timer: none may be set
      vi.useFakeTimers({ toFake: ["setTimeout"] });
      try {
        const endedBefore = ended.length;
        openConnects();
        await expect(connecting[0]).rejects.toThrow();
        // the refused attempt ends its connection, then gives up
        await vi.waitFor(() => expect(ended.length).toBeGreaterThan(endedBefore), WAIT);
        await Promise.allSettled(ended.slice(endedBefore));
        for (let turn = 0; turn < 3; turn++) await new Promise((resolve) => setImmediate(resolve));
        expect(vi.getTimerCount()).toBe(0);
      } finally {
        vi.useRealTimers();
      }
      expect(connecting).toHaveLength(1);
    } finally {
      await hosts.close();
    }
  });

  it("after its LISTEN connection came back, reads no live state for nobody and leaves no connection open once closed", async () => {
    const hosts = await refusableHosts();
    try {
      const { a, b, refusable, connections } = hosts;
      const seqs: number[] = [];
      b.subscribe(S, (notice: CommitNotice) => {
        if (notice.kind === "append" || notice.kind === "create")
          seqs.push(...notice.events.map((e) => e.seq));
      });
      const rereads = vi.spyOn(PgLiveFeed.prototype, "rereadAll");
      await refusable.lockOut();
      await a.create({ sessionId: S, owner: "o", model: "m" });
      await refusable.letIn();
      await expect.poll(() => refusable.listening(), { timeout: 10_000 }).toBe(true);
      // the catch-up after the reconnect delivered the session created meanwhile
      await vi.waitFor(() => expect(seqs).toEqual([1]), WAIT);
      // and the feed handles NOTIFYs again, each after the catch-up
      await a.append(S, [delta("t", "two")]);
      await vi.waitFor(() => expect(seqs).toEqual([1, 2]), WAIT);
      expect(rereads).not.toHaveBeenCalled();
      await b.close();
      await expect.poll(connections, { timeout: 10_000, interval: 20 }).toBe(0);
    } finally {
      await hosts.close();
    }
  });
});
