import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";
import { describe, expect, it } from "vitest";
import type { DismissalChange } from "../../../src/store/dismissals.js";
import { PostgresSessionStore } from "../../../src/store/postgres/postgres-store.js";
import { pgUrl } from "../contract/backends.js";
import { refusableRole } from "./refusable-role.js";

/**
 * A host tells a principal's sockets of a dismissal or restore another host made. It hears of it
 * by the other host's NOTIFY, which says whose it is and its new state; a NOTIFY sent while its
 * LISTEN connection was down reached nobody, so once back in it reads what the principals it
 * watches dismissed meanwhile, and which dismissals it remembers are gone.
 */
const describePg = pgUrl ? describe : describe.skip;

/** Two stores on one schema: `a` as the database's own user, `b` as a role the test can lock out. */
async function twoHosts() {
  const refusable = await refusableRole("smx_dism");
  const { schema } = refusable;
  const opened: PostgresSessionStore[] = [];
  const close = async () => {
    for (const store of opened) await store.close();
    await refusable.drop();
  };
  try {
    const b = await PostgresSessionStore.open(refusable.url, { schema, maxConnections: 2 });
    opened.push(b);
    const a = await PostgresSessionStore.open(pgUrl!, { schema, maxConnections: 2 });
    opened.push(a);
    return { a, b, refusable, close };
  } catch (error) {
    await close();
    throw error;
  }
}

const PAST_FIRST_RECONNECT_MS = 400;

describePg("PostgreSQL dismissals another host made", () => {
  it("are told as heard, each change once, with whose it is and its state", async () => {
    const { a, b, close } = await twoHosts();
    try {
      const heard: DismissalChange[] = [];
      b.subscribeDismissals(
        (change) => heard.push(change),
        () => ["alice"],
      );
      await a.create({ sessionId: "s", owner: "alice", model: "m" });
      await a.dismiss("s", "alice", 1);
      await a.dismiss("s", "alice", 2);
      await a.restore("s", "alice");
      await a.dismiss("s", "bob", 3);
      await expect.poll(() => heard.length, { timeout: 5_000 }).toBe(3);
      await sleep(200);
      expect(heard).toEqual([
        { sessionId: "s", principal: "alice", dismissed: true },
        { sessionId: "s", principal: "alice", dismissed: false },
        { sessionId: "s", principal: "bob", dismissed: true },
      ]);
    } finally {
      await close();
    }
  });

  it("are told as heard though the principal's dismissals were read after the COMMIT and before the NOTIFY", async () => {
    const { a, b, close } = await twoHosts();
    try {
      await a.create({ sessionId: "s", owner: "alice", model: "m" });
      const heard: DismissalChange[] = [];
      b.subscribeDismissals(
        (change) => heard.push(change),
        () => ["alice"],
      );
      // `b`'s NOTIFYs held back, as a busy host or a slow LISTEN connection holds them
      const feed = (b as unknown as { feed: { heard(text: string): void } }).feed;
      const hear = feed.heard.bind(feed);
      const held: string[] = [];
      feed.heard = (text) => held.push(text);
      await a.dismiss("s", "alice", 1);
      await expect.poll(() => held.length, { timeout: 5_000 }).toBeGreaterThan(0);
      // alice's first socket on `b`'s host arrives now: the read finds the dismissal, whose
      // NOTIFY that socket has not been told of
      await b.rememberDismissals("alice");
      feed.heard = hear;
      for (const text of held) hear(text);
      await expect.poll(() => heard.length, { timeout: 5_000 }).toBe(1);
      await sleep(200);
      expect(heard).toEqual([{ sessionId: "s", principal: "alice", dismissed: true }]);
    } finally {
      await close();
    }
  });

  it("after an outage, are told as read: those the watched principals made meanwhile, once", async () => {
    const { a, b, refusable, close } = await twoHosts();
    try {
      const heard: DismissalChange[] = [];
      b.subscribeDismissals(
        (change) => heard.push(change),
        () => ["alice"],
      );
      for (const sessionId of ["s1", "s2", "s3"]) await a.create({ sessionId, owner: "alice", model: "m" });
      await a.dismiss("s1", "alice", 1);
      await a.dismiss("s3", "alice", 1);
      await expect.poll(() => heard.length, { timeout: 5_000 }).toBe(2);

      await refusable.lockOut();
      await a.restore("s1", "alice");
      await a.dismiss("s2", "alice", 2);
      await a.dismiss("s2", "bob", 2);
      await sleep(PAST_FIRST_RECONNECT_MS);
      await refusable.letIn();
      await expect.poll(() => refusable.listening(), { timeout: 10_000 }).toBe(true);
      await expect.poll(() => heard.length, { timeout: 5_000 }).toBe(4);
      // a change after the outage, heard after anything the re-read told
      await a.restore("s3", "alice");
      await expect.poll(() => heard.length, { timeout: 5_000 }).toBe(5);
      await sleep(200);
      expect(heard.slice(2)).toEqual([
        { sessionId: "s1", principal: "alice", dismissed: false },
        { sessionId: "s2", principal: "alice", dismissed: true },
        { sessionId: "s3", principal: "alice", dismissed: false },
      ]);
    } finally {
      await close();
    }
  });

  it("after an outage, tell a restore of a dismissal made before the principal was watched, once remembered", async () => {
    const { a, b, refusable, close } = await twoHosts();
    try {
      await a.create({ sessionId: "s", owner: "alice", model: "m" });
      await a.create({ sessionId: "later", owner: "alice", model: "m" });
      // `b` hears of the dismissal before anything there watches dismissals
      let noticed = false;
      const off = b.subscribeAll((sessionId, notice) => {
        if (sessionId === "s" && notice.kind === "meta") noticed = true;
      });
      await a.dismiss("s", "alice", 1);
      await expect.poll(() => noticed, { timeout: 5_000 }).toBe(true);
      off();
      const heard: DismissalChange[] = [];
      b.subscribeDismissals(
        (change) => heard.push(change),
        () => ["alice"],
      );
      // alice's first socket on `b`'s host
      await b.rememberDismissals("alice");

      await refusable.lockOut();
      await a.restore("s", "alice");
      await sleep(PAST_FIRST_RECONNECT_MS);
      await refusable.letIn();
      await expect.poll(() => refusable.listening(), { timeout: 10_000 }).toBe(true);
      await a.dismiss("later", "alice", 2);
      await expect.poll(() => heard.length, { timeout: 5_000 }).toBe(2);
      expect(heard).toEqual([
        { sessionId: "s", principal: "alice", dismissed: false },
        { sessionId: "later", principal: "alice", dismissed: true },
      ]);
    } finally {
      await close();
    }
  });

  it("after an outage, tell a deleted session's dismissal as gone and none made before its delete, while the purge has not reached them", async () => {
    const { a, b, refusable, close } = await twoHosts();
    const rows = new pg.Client({ connectionString: pgUrl! });
    await rows.connect();
    try {
      await rows.query(`SET search_path = "${refusable.schema}"`);
      for (const sessionId of ["first", "s1", "s2", "later"])
        await a.create({ sessionId, owner: "alice", model: "m" });
      await a.append("first", [{ type: "assistant/delta", data: { turnId: "t", text: "x" } }]);
      // the first purge, the cleared log's, waits under way until this lock goes: the deletes' wait
      await rows.query("BEGIN");
      await rows.query("SELECT 1 FROM events WHERE session_id = 'first' FOR UPDATE");
      expect((await a.clear("first")).status).toBe("cleared");
      const heard: DismissalChange[] = [];
      b.subscribeDismissals(
        (change) => heard.push(change),
        () => ["alice"],
      );
      await a.dismiss("s1", "alice", 1);
      await expect.poll(() => heard.length, { timeout: 5_000 }).toBe(1);

      await refusable.lockOut();
      await a.dismiss("s2", "alice", 2);
      await a.delete("s2");
      await a.delete("s1");
      const stored = await rows.query("SELECT count(*)::int AS n FROM dismissals");
      expect(stored.rows[0].n).toBe(2);
      await sleep(PAST_FIRST_RECONNECT_MS);
      await refusable.letIn();
      await expect.poll(() => refusable.listening(), { timeout: 10_000 }).toBe(true);
      await a.dismiss("later", "alice", 3);
      await expect.poll(() => heard.length, { timeout: 5_000 }).toBe(3);
      await sleep(200);
      expect(heard).toEqual([
        { sessionId: "s1", principal: "alice", dismissed: true },
        { sessionId: "s1", principal: "alice", dismissed: false },
        { sessionId: "later", principal: "alice", dismissed: true },
      ]);
    } finally {
      await rows.query("ROLLBACK");
      await rows.end();
      await close();
    }
  });

  it("reads a principal's dismissals once however often their first socket arrives, and again after a read failed", async () => {
    const { a, b, close } = await twoHosts();
    try {
      await a.create({ sessionId: "s", owner: "alice", model: "m" });
      b.subscribeDismissals(
        () => undefined,
        () => ["alice"],
      );
      const reads = (
        b as unknown as { feed: { reads: { dismissalsOf: (...args: unknown[]) => Promise<string[]> } } }
      ).feed.reads;
      const real = reads.dismissalsOf.bind(reads);
      let calls = 0;
      let fail = true;
      reads.dismissalsOf = async (...args) => {
        calls++;
        if (fail) throw new Error("connection lost");
        return real(...args);
      };
      await expect(b.rememberDismissals("alice")).rejects.toThrow("connection lost");
      fail = false;
      for (let i = 0; i < 5; i++) await b.rememberDismissals("alice");
      await b.rememberDismissals("bob");
      expect(calls).toBe(3);
    } finally {
      await close();
    }
  });
});
