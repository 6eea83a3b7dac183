import { randomBytes } from "node:crypto";
import pg from "pg";
import { describe, expect, it, vi } from "vitest";
import { PG_SCHEMA_VERSION } from "../../../src/store/postgres/pg-schema.js";
import { PostgresSessionStore } from "../../../src/store/postgres/postgres-store.js";
import { cleanupsAfterEach } from "../../support/cleanups.js";
import { readWholeLog } from "../../support/whole-log.js";
import { dropSchema, pgUrl } from "../contract/backends.js";
import { answeredTurns, delta, jobsAndDismissals, longLog, message, storedBytes } from "../purge-fixture.js";

const cleanups = cleanupsAfterEach();

/** A small step, so a log of a hundred rows takes many. */
const STEP = { rows: 4, bytes: 2048 };

/** A fresh schema, dropped after the test; `open` opens a host on it (closed after the test). */
function schema() {
  const name = `purge_${randomBytes(6).toString("hex")}`;
  cleanups.push(() => dropSchema(pgUrl!, name));
  return {
    name,
    async open(): Promise<PostgresSessionStore> {
      const store = await PostgresSessionStore.open(pgUrl!, {
        schema: name,
        maxConnections: 4,
        purgeStep: STEP,
      });
      cleanups.push(() => store.close());
      return store;
    },
  };
}

/** A connection of its own on the schema: counts rows, and holds locks the way another writer would. */
async function connection(schemaName: string) {
  const client = new pg.Client({ connectionString: pgUrl! });
  await client.connect();
  cleanups.push(() => client.end());
  await client.query(`SET search_path = "${schemaName}"`);
  const count = async (sql: string, params: unknown[] = []) =>
    Number((await client.query<{ n: string }>(sql, params)).rows[0]!.n);
  // rows stored for the session under any key but its current one
  const abandoned = (table: string) => (sessionId: string) =>
    count(
      `SELECT count(*) AS n FROM ${table} WHERE (session_id = $1 OR session_id LIKE $1 || ':%')
       AND session_id IS DISTINCT FROM (SELECT coalesce(log_key, session_id) FROM projections WHERE session_id = $1)`,
      [sessionId],
    );
  return {
    client,
    abandonedEvents: abandoned("events"),
    abandonedSearchDocs: abandoned("search_docs"),
    chunks: (id: string) =>
      count("SELECT count(*) AS n FROM attachment_chunks WHERE attachment_id = $1", [id]),
    attachments: (id: string) =>
      count("SELECT count(*) AS n FROM attachments WHERE attachment_id = $1", [id]),
    purges: () => count("SELECT count(*) AS n FROM purges"),
    interactions: (sessionId: string) =>
      count("SELECT count(*) AS n FROM interactions WHERE session_id = $1", [sessionId]),
    promptKeys: (sessionId: string) =>
      count("SELECT count(*) AS n FROM prompt_keys WHERE session_id = $1", [sessionId]),
    jobs: (sessionId: string) => count("SELECT count(*) AS n FROM jobs WHERE session_id = $1", [sessionId]),
    dismissals: (sessionId: string) =>
      count("SELECT count(*) AS n FROM dismissals WHERE session_id = $1", [sessionId]),
    /**
     * Locks one event row of the session's current log, as a transaction of its own: the purge
     * step that reaches it waits, under way, until `release`.
     */
    async holdEvent(sessionId: string, seq: number): Promise<() => Promise<void>> {
      await client.query("BEGIN");
      await client.query("SELECT 1 FROM events WHERE session_id = $1 AND seq = $2 FOR UPDATE", [
        sessionId,
        seq,
      ]);
      return async () => void (await client.query("ROLLBACK"));
    },
  };
}

async function seqs(store: PostgresSessionStore, sessionId: string): Promise<number[] | string> {
  const read = await readWholeLog(store, sessionId);
  return read.status === "ok" ? read.events.map((event) => event.seq) : read.status;
}

describe.skipIf(!pgUrl)("purging what a clear or a delete left (PostgreSQL)", () => {
  it("a clear answers while the old epoch's rows remain; their purge runs outside the group commit, never read by any host", async () => {
    const db = schema();
    const a = await db.open();
    const b = await db.open();
    await longLog(a, "long", 100, 10);
    await a.create({ sessionId: "other", owner: "p", model: "m" });
    // the other host holds the session's state from a write of its own, under the old key
    expect((await b.append("long", [delta("b before")])).status).toBe("appended");
    expect(await a.ownerStoredBytes("o")).toBe(await storedBytes(a, "long"));
    const rows = await connection(db.name);
    // the purge's step that reaches event 41 waits, under way, until this lock goes
    const release = await rows.holdEvent("long", 41);

    // before, the clear deleted the log in the group commit and waited on this lock itself
    const cleared = await a.clear("long");
    expect(cleared.status).toBe("cleared");
    // counted out by the clear itself
    expect(await a.ownerStoredBytes("o")).toBe(0);
    // the purge went a few rows a step, up to the held row
    await vi.waitFor(async () => expect(await rows.abandonedEvents("long")).toBe(62), { timeout: 20_000 });
    expect(await rows.purges()).toBe(1);
    expect(await rows.abandonedSearchDocs("long")).toBe(10);

    // while its step waits, this host's writes commit, and each host reads the new epoch only
    expect((await a.append("other", [delta("x")])).status).toBe("appended");
    const appended = await a.append("long", [delta("new epoch")]);
    expect(appended.status === "appended" && appended.events[0]!.seq).toBe(1);
    const fromB = await b.append("long", [delta("b after")]);
    expect(fromB.status === "appended" && fromB.events[0]!.seq).toBe(2);
    for (const host of [a, b]) {
      expect(await seqs(host, "long")).toEqual([1, 2]);
      const page = await host.page("long", { limit: 50 });
      expect(page.status === "ok" && page.events.map((event) => event.seq)).toEqual([1, 2]);
      const header = await host.header("long");
      expect(header.status === "ok" && header.headSeq).toBe(2);
      expect(await host.search("oldword40", 10)).toEqual([]);
      expect(await host.search("oldword40", 10, "o")).toEqual([]);
      expect((await host.projection("long"))?.seq).toBe(2);
    }
    const forked = await b.fork({ sourceId: "long", targetId: "copy", owner: "o" });
    expect(forked.status === "created" && forked.events.length).toBe(3);

    await release();
    await a.purgesSettled();
    expect(await rows.abandonedEvents("long")).toBe(0);
    expect(await rows.abandonedSearchDocs("long")).toBe(0);
    expect(await rows.purges()).toBe(0);
    expect(await a.ownerStoredBytes("o")).toBe(
      (await storedBytes(a, "long")) + (await storedBytes(a, "copy")),
    );
    expect(await seqs(b, "long")).toEqual([1, 2]);
  });

  it("a host whose schema moved past its build takes no purge step more: a newer host finishes it", async () => {
    const db = schema();
    const store = await db.open();
    await longLog(store, "gone", 50, 10);
    const rows = await connection(db.name);
    const release = await rows.holdEvent("gone", 21);
    expect((await store.delete("gone")).status).toBe("deleted");
    // the step that reaches event 21 waits, under way
    await vi.waitFor(async () => expect(await rows.abandonedEvents("gone")).toBe(31), { timeout: 20_000 });
    // a newer build's migration that stops this one, as `/readyz` reads it
    store.sawStoppingVersion(PG_SCHEMA_VERSION + 1);
    await release();
    await store.purgesSettled();
    // the step under way ends; none follows, and the purge stays for a host of the newer build
    expect(await rows.abandonedEvents("gone")).toBe(27);
    expect(await rows.purges()).toBe(1);
    const newer = await db.open();
    await newer.purgesSettled();
    expect(await rows.abandonedEvents("gone")).toBe(0);
    expect(await rows.purges()).toBe(0);
  });

  it("a delete answers while its log and attachment remain; gone for every reader, counted out once", async () => {
    const db = schema();
    const store = await db.open();
    const keep = await store.putAttachment({ owner: "o", name: "k", type: "t", bytes: new Uint8Array(500) });
    const attachmentId = await store.putAttachment({
      owner: "o",
      name: "f.bin",
      type: "application/octet-stream",
      bytes: new Uint8Array(600_000).fill(7),
    });
    await longLog(store, "gone", 50, 10);
    await store.append("gone", [message("see the file", attachmentId)]);
    const rows = await connection(db.name);
    expect(await rows.chunks(attachmentId)).toBe(3);
    const release = await rows.holdEvent("gone", 21);

    expect((await store.delete("gone")).status).toBe("deleted");
    await vi.waitFor(async () => expect(await rows.abandonedEvents("gone")).toBe(32), { timeout: 20_000 });
    expect(await rows.chunks(attachmentId)).toBe(3);
    // gone for every reader from the delete on, and out of the quota
    expect(await store.attachmentInfo(attachmentId)).toBeNull();
    expect(await store.getAttachment(attachmentId)).toBeNull();
    expect(await store.ownerStoredBytes("o")).toBe(500);
    expect((await store.readAfter("gone", 0, 10)).status).toBe("retired");
    expect(await store.search("oldword40", 10)).toEqual([]);

    await release();
    await store.purgesSettled();
    expect(await rows.abandonedEvents("gone")).toBe(0);
    expect(await rows.abandonedSearchDocs("gone")).toBe(0);
    expect(await rows.chunks(attachmentId)).toBe(0);
    expect(await rows.attachments(attachmentId)).toBe(0);
    expect(await rows.purges()).toBe(0);
    expect(await store.ownerStoredBytes("o")).toBe(500);
    expect((await store.attachmentInfo(keep))?.size).toBe(500);
  });

  it("a clear leaves its epoch's interactions, a delete its session's and its prompt keys, to the purge: found by no host meanwhile", async () => {
    const db = schema();
    const a = await db.open();
    const b = await db.open();
    await answeredTurns(a, "cleared", 12);
    await answeredTurns(a, "gone", 12);
    const rows = await connection(db.name);
    // the first step, the cleared log's, waits under way until this lock goes: no purge moves on
    const release = await rows.holdEvent("cleared", 2);

    expect((await a.clear("cleared")).status).toBe("cleared");
    expect((await a.delete("gone")).status).toBe("deleted");
    // answered before any of them was deleted
    expect([
      await rows.interactions("cleared"),
      await rows.interactions("gone"),
      await rows.promptKeys("gone"),
    ]).toEqual([12, 12, 12]);
    await answeredTurns(a, "cleared", 2, "new");
    for (const host of [a, b]) {
      for (const sessionId of ["cleared", "gone"]) {
        expect(await host.interaction(`${sessionId}-i0`)).toBeNull();
        expect(await host.turnInteractions(sessionId, `${sessionId}-t0`)).toEqual([]);
      }
      // a deleted session's key answers no retry (its id is retired); a clear keeps the session's
      expect(await host.findPrompt("gone", "gone-c0")).toBeNull();
      expect(await host.findPrompt("cleared", "cleared-c0")).toEqual({
        queued: false,
        turnId: "cleared-t0",
        seq: 3,
      });
      expect((await host.interaction("cleared-inew0"))?.state).toBe("resolved");
      expect((await host.turnInteractions("cleared", "cleared-tnew1")).length).toBe(1);
      expect(await host.liveStatePage(null, 10)).toEqual({ sessions: [], next: null });
    }
    for (const interactionId of ["cleared-i0", "gone-i0"])
      expect(await b.resolveInteraction(interactionId, { outcome: "approve" })).toEqual({
        status: "not_found",
      });
    expect((await b.append("gone", [delta("late")])).status).toBe("retired");

    await release();
    await a.purgesSettled();
    expect([
      await rows.interactions("cleared"),
      await rows.interactions("gone"),
      await rows.promptKeys("gone"),
    ]).toEqual([2, 0, 0]);
    expect(await rows.promptKeys("cleared")).toBe(14);
    expect(await rows.purges()).toBe(0);
  });

  it("a delete leaves its session's ended jobs and dismissals to the purge: found by no host meanwhile", async () => {
    const db = schema();
    const a = await db.open();
    const b = await db.open();
    const principals = ["ann", "bob", "cy"];
    await jobsAndDismissals(a, "gone", 12, principals);
    await jobsAndDismissals(a, "kept", 12, principals);
    await a.create({ sessionId: "first", owner: "o", model: "m" });
    await a.append("first", [delta("x"), delta("y")]);
    const rows = await connection(db.name);
    // the first purge, the cleared log's, waits under way until this lock goes: the delete's waits
    const release = await rows.holdEvent("first", 1);
    expect((await a.clear("first")).status).toBe("cleared");

    expect((await a.delete("gone")).status).toBe("deleted");
    // its running job went with it; its ended jobs and its dismissals are still stored
    expect([await rows.jobs("gone"), await rows.dismissals("gone")]).toEqual([12, 3]);
    for (const host of [a, b]) {
      for (const principal of principals) expect(await host.isDismissed("gone", principal)).toBe(false);
      expect(await host.isDismissed("kept", "bob")).toBe(true);
      const live = await host.liveStatePage(null, 10);
      expect(
        live.sessions.map((session) => [session.sessionId, session.jobs.map((job) => job.jobId)]),
      ).toEqual([["kept", ["kept-j12"]]]);
    }
    expect(await b.dismiss("gone", "ann", 2)).toEqual({ status: "not_found" });
    expect(await b.setJobProgress("gone-j12", 0.5)).toEqual({ status: "not_found" });

    await release();
    await a.purgesSettled();
    expect([await rows.jobs("gone"), await rows.dismissals("gone"), await rows.purges()]).toEqual([0, 0, 0]);
    expect([await rows.jobs("kept"), await rows.dismissals("kept")]).toEqual([13, 3]);
  });

  it("interactions stored before they had log keys are found while their session lives, and purged with its delete", async () => {
    const db = schema();
    const store = await db.open();
    await answeredTurns(store, "old", 12);
    const rows = await connection(db.name);
    // as migration 17 left the rows stored before it
    await rows.client.query("UPDATE interactions SET log_key = NULL");
    expect((await store.interaction("old-i3"))?.state).toBe("resolved");
    expect((await store.turnInteractions("old", "old-t3")).length).toBe(1);

    expect((await store.delete("old")).status).toBe("deleted");
    expect(await store.interaction("old-i3")).toBeNull();
    await store.purgesSettled();
    expect(await rows.interactions("old")).toBe(0);
    expect(await rows.promptKeys("old")).toBe(0);
    expect(await rows.purges()).toBe(0);
  });

  it("a session created and cleared in one transaction keeps its new key and counts its log out", async () => {
    const db = schema();
    const store = await db.open();
    await store.create({ sessionId: "other", owner: "p", model: "m" });
    // queued together behind the append, they commit in one transaction
    const [, created, cleared] = await Promise.all([
      store.append("other", [delta("x")]),
      store.create({ sessionId: "fresh", owner: "o", model: "m" }),
      store.clear("fresh"),
    ]);
    expect([created.status, cleared.status]).toEqual(["created", "cleared"]);
    expect(await store.ownerStoredBytes("o")).toBe(0);
    expect((await store.append("fresh", [delta("after")])).status).toBe("appended");
    const other = await db.open();
    for (const host of [store, other]) expect(await seqs(host, "fresh")).toEqual([1]);
    await store.purgesSettled();
    const rows = await connection(db.name);
    expect(await rows.abandonedEvents("fresh")).toBe(0);
    expect(await rows.purges()).toBe(0);
    expect(await store.ownerStoredBytes("o")).toBe(await storedBytes(store, "fresh"));
  });

  it("a purge a closed host left is finished by the next host that opens the store", async () => {
    const db = schema();
    const first = await db.open();
    await longLog(first, "long", 60, 10);
    const rows = await connection(db.name);
    const release = await rows.holdEvent("long", 21);
    const cleared = await first.clear("long");
    await vi.waitFor(async () => expect(await rows.abandonedEvents("long")).toBe(41), { timeout: 20_000 });
    // the step under way ends with the lock, and no other starts
    const closing = first.close();
    await release();
    await closing;
    expect(await rows.abandonedEvents("long")).toBeGreaterThan(0);
    expect(await rows.purges()).toBe(1);

    const next = await db.open();
    const header = await next.header("long");
    expect(header.status === "ok" && [header.header.epoch, header.headSeq]).toEqual([
      cleared.status === "cleared" && cleared.epoch,
      0,
    ]);
    await next.purgesSettled();
    expect(await rows.abandonedEvents("long")).toBe(0);
    expect(await rows.abandonedSearchDocs("long")).toBe(0);
    expect(await rows.purges()).toBe(0);
    expect(await next.ownerStoredBytes("o")).toBe(0);
  });
});
