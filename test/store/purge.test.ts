import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import Database from "better-sqlite3";
import { describe, expect, it, vi } from "vitest";
import { SCHEMA_VERSION } from "../../src/store/migrations.js";
import { SqlitePurger } from "../../src/store/sqlite-purger.js";
import { SqliteSessionStore } from "../../src/store/sqlite-store.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { UNDO_LOG_KEYS } from "../support/purge-migration.js";
import { tempDir } from "../support/temp-dir.js";
import { readWholeLog } from "../support/whole-log.js";
import { answeredTurns, delta, jobsAndDismissals, longLog, message, storedBytes } from "./purge-fixture.js";

const fixture = fileURLToPath(new URL("./fixtures/clear-and-die.ts", import.meta.url));

const cleanups = cleanupsAfterEach();

/** A small step, so a log of a few hundred rows takes many. */
const STEP = { rows: 8, bytes: 2048 };

function file(): string {
  const dir = tempDir("sessionmux-purge-");
  cleanups.push(() => dir.remove());
  return dir.file("sessions.db");
}

function open(path: string): SqliteSessionStore {
  const store = SqliteSessionStore.open(path, { purgeStep: STEP });
  cleanups.push(() => store.close());
  return store;
}

/** A reader of the file beside the store: what is committed, row by row. */
function rows(path: string) {
  const db = new Database(path, { readonly: true });
  cleanups.push(() => void db.close());
  const count = (sql: string, ...params: unknown[]) =>
    db
      .prepare(sql)
      .pluck()
      .get(...params) as number;
  return {
    /** Event rows stored for the session under any key but its current one. */
    abandonedEvents: (sessionId: string) =>
      count(
        `SELECT count(*) FROM events WHERE (session_id = ? OR session_id LIKE ? || ':%')
         AND session_id IS NOT (SELECT log_key FROM projections WHERE session_id = ?)`,
        sessionId,
        sessionId,
        sessionId,
      ),
    abandonedSearchDocs: (sessionId: string) =>
      count(
        `SELECT count(*) FROM search_docs WHERE (session_id = ? OR session_id LIKE ? || ':%')
         AND session_id IS NOT (SELECT log_key FROM projections WHERE session_id = ?)`,
        sessionId,
        sessionId,
        sessionId,
      ),
    chunks: (attachmentId: string) =>
      count("SELECT count(*) FROM attachment_chunks WHERE attachment_id = ?", attachmentId),
    attachments: (attachmentId: string) =>
      count("SELECT count(*) FROM attachments WHERE attachment_id = ?", attachmentId),
    purges: () => count("SELECT count(*) FROM purges"),
    interactions: (sessionId: string) =>
      count("SELECT count(*) FROM interactions WHERE session_id = ?", sessionId),
    promptKeys: (sessionId: string) =>
      count("SELECT count(*) FROM prompt_keys WHERE session_id = ?", sessionId),
    jobs: (sessionId: string) => count("SELECT count(*) FROM jobs WHERE session_id = ?", sessionId),
    dismissals: (sessionId: string) =>
      count("SELECT count(*) FROM dismissals WHERE session_id = ?", sessionId),
  };
}

describe("purging what a clear or a delete left (SQLite)", () => {
  it("a clear answers while the old epoch's rows remain; they go in many steps between other appends, never read", async () => {
    const path = file();
    const store = open(path);
    await longLog(store, "long", 400, 20);
    await store.create({ sessionId: "other", owner: "p", model: "m" });
    const db = rows(path);
    expect(await store.ownerStoredBytes("o")).toBe(await storedBytes(store, "long"));

    const cleared = await store.clear("long");
    expect(cleared.status).toBe("cleared");
    const left = db.abandonedEvents("long");
    // answered before anything of the old epoch was deleted: its cost is not the log's
    expect(left).toBe(401);
    expect(db.abandonedSearchDocs("long")).toBe(20);
    // counted out by the clear itself
    expect(await store.ownerStoredBytes("o")).toBe(0);

    const appended = await store.append("long", [delta("new epoch")]);
    expect(appended.status === "appended" && appended.events[0]!.seq).toBe(1);
    const steps = vi.spyOn(SqlitePurger.prototype, "step");
    let settled = false;
    void store.purgesSettled().then(() => {
      settled = true;
    });
    const seen: number[] = [];
    while (!settled) {
      expect((await store.append("other", [delta("x")])).status).toBe("appended");
      const remaining = db.abandonedEvents("long");
      if (remaining > 0) seen.push(remaining);
      // nothing of the old epoch is ever read or found
      const read = await readWholeLog(store, "long");
      expect(read.status === "ok" && read.events.map((event) => event.seq)).toEqual([1]);
      const page = await store.page("long", { limit: 50 });
      expect(page.status === "ok" && page.events.length).toBe(1);
      expect(await store.search("oldword40", 10)).toEqual([]);
      expect(await store.search("oldword40", 10, "o")).toEqual([]);
    }
    // other appends committed while the old rows went, a step of at most STEP.rows at a time
    expect(seen.length).toBeGreaterThan(0);
    expect(steps.mock.calls.length).toBeGreaterThanOrEqual(Math.ceil(401 / STEP.rows));
    steps.mockRestore();
    expect(db.abandonedEvents("long")).toBe(0);
    expect(db.abandonedSearchDocs("long")).toBe(0);
    expect(db.purges()).toBe(0);
    expect(await store.ownerStoredBytes("o")).toBe(await storedBytes(store, "long"));
    expect(store.integrityCheck()).toBe("ok");
  });

  it("a delete answers while the log and the attachments remain; they go afterwards, counted out once", async () => {
    const path = file();
    const store = open(path);
    const keep = await store.putAttachment({ owner: "o", name: "k", type: "t", bytes: new Uint8Array(500) });
    const attachmentId = await store.putAttachment({
      owner: "o",
      name: "f.bin",
      type: "application/octet-stream",
      bytes: new Uint8Array(600_000).fill(7),
    });
    await longLog(store, "gone", 200, 20);
    await store.append("gone", [message("see the file", attachmentId)]);
    const db = rows(path);
    expect(db.chunks(attachmentId)).toBe(3);

    expect((await store.delete("gone")).status).toBe("deleted");
    expect(db.abandonedEvents("gone")).toBe(202);
    expect(db.chunks(attachmentId)).toBe(3);
    // gone for every reader from the delete on, and out of the quota
    expect(await store.attachmentInfo(attachmentId)).toBeNull();
    expect(await store.getAttachment(attachmentId)).toBeNull();
    expect(await store.ownerStoredBytes("o")).toBe(500);
    expect((await store.readAfter("gone", 0, 10)).status).toBe("retired");
    expect(await store.search("oldword40", 10)).toEqual([]);

    await store.purgesSettled();
    expect(db.abandonedEvents("gone")).toBe(0);
    expect(db.abandonedSearchDocs("gone")).toBe(0);
    expect(db.chunks(attachmentId)).toBe(0);
    expect(db.attachments(attachmentId)).toBe(0);
    expect(db.purges()).toBe(0);
    expect(await store.ownerStoredBytes("o")).toBe(500);
    expect((await store.attachmentInfo(keep))?.size).toBe(500);
  });

  it("a clear leaves its epoch's interactions, a delete its session's and its prompt keys, to the purge: found by no read meanwhile", async () => {
    const path = file();
    const store = open(path);
    // no step deletes anything until the store is opened again
    const held = vi.spyOn(SqlitePurger.prototype, "step").mockReturnValue(() => false);
    cleanups.push(() => held.mockRestore());
    await answeredTurns(store, "cleared", 30);
    await answeredTurns(store, "gone", 30);
    const db = rows(path);

    expect((await store.clear("cleared")).status).toBe("cleared");
    expect((await store.delete("gone")).status).toBe("deleted");
    // answered before any of them was deleted: their cost is not the session's
    expect([db.interactions("cleared"), db.interactions("gone"), db.promptKeys("gone")]).toEqual([
      30, 30, 30,
    ]);
    for (const sessionId of ["cleared", "gone"]) {
      expect(await store.interaction(`${sessionId}-i0`)).toBeNull();
      expect(await store.turnInteractions(sessionId, `${sessionId}-t0`)).toEqual([]);
      expect(await store.resolveInteraction(`${sessionId}-i0`, { outcome: "approve" })).toEqual({
        status: "not_found",
      });
    }
    // a deleted session's key answers no retry (its id is retired); a clear keeps the session's
    expect(await store.findPrompt("gone", "gone-c0")).toBeNull();
    expect((await store.append("gone", [delta("late")])).status).toBe("retired");
    expect(await store.findPrompt("cleared", "cleared-c0")).toEqual({
      queued: false,
      turnId: "cleared-t0",
      seq: 3,
    });
    // the new epoch's are found, the old epoch's answers nothing
    await answeredTurns(store, "cleared", 2, "new");
    expect((await store.interaction("cleared-inew0"))?.state).toBe("resolved");
    expect((await store.turnInteractions("cleared", "cleared-tnew1")).length).toBe(1);
    expect(await store.liveStatePage(null, 10)).toEqual({ sessions: [], next: null });
    held.mockRestore();
    await store.close();

    const reopened = open(path);
    await reopened.purgesSettled();
    expect([db.interactions("cleared"), db.interactions("gone"), db.promptKeys("gone")]).toEqual([2, 0, 0]);
    expect(db.promptKeys("cleared")).toBe(32);
    expect(db.purges()).toBe(0);
    expect((await reopened.interaction("cleared-inew1"))?.state).toBe("resolved");
    expect(reopened.integrityCheck()).toBe("ok");
  });

  it("a delete leaves its session's ended jobs and dismissals to the purge: found by no read meanwhile", async () => {
    const path = file();
    const store = open(path);
    const held = vi.spyOn(SqlitePurger.prototype, "step").mockReturnValue(() => false);
    cleanups.push(() => held.mockRestore());
    const principals = ["ann", "bob", "cy"];
    await jobsAndDismissals(store, "gone", 30, principals);
    await jobsAndDismissals(store, "kept", 30, principals);
    const db = rows(path);

    expect((await store.delete("gone")).status).toBe("deleted");
    // its running job went with it; its ended jobs and its dismissals are still stored
    expect([db.jobs("gone"), db.dismissals("gone")]).toEqual([30, 3]);
    for (const principal of principals) expect(await store.isDismissed("gone", principal)).toBe(false);
    expect(await store.dismiss("gone", "ann", 2)).toEqual({ status: "not_found" });
    expect(await store.restore("gone", "ann")).toEqual({ status: "not_found" });
    const live = await store.liveStatePage(null, 10);
    expect(live.sessions.map((session) => [session.sessionId, session.jobs.map((job) => job.jobId)])).toEqual(
      [["kept", ["kept-j30"]]],
    );
    expect(await store.setJobProgress("gone-j30", 0.5)).toEqual({ status: "not_found" });
    expect(await store.isDismissed("kept", "ann")).toBe(true);
    held.mockRestore();
    await store.close();

    const reopened = open(path);
    await reopened.purgesSettled();
    expect([db.jobs("gone"), db.dismissals("gone"), db.purges()]).toEqual([0, 0, 0]);
    expect([db.jobs("kept"), db.dismissals("kept")]).toEqual([31, 3]);
    expect(await reopened.isDismissed("kept", "cy")).toBe(true);
    expect(reopened.integrityCheck()).toBe("ok");
  });

  it("a store opened again in the middle of a purge finishes it", async () => {
    const path = file();
    const store = open(path);
    await longLog(store, "long", 300, 20);
    const cleared = await store.clear("long");
    await store.close();
    const db = rows(path);
    expect(db.abandonedEvents("long")).toBeGreaterThan(0);
    expect(db.purges()).toBe(1);

    const reopened = open(path);
    const header = await reopened.header("long");
    expect(header.status === "ok" && [header.header.epoch, header.headSeq]).toEqual([
      cleared.status === "cleared" && cleared.epoch,
      0,
    ]);
    await reopened.purgesSettled();
    expect(db.abandonedEvents("long")).toBe(0);
    expect(db.abandonedSearchDocs("long")).toBe(0);
    expect(db.purges()).toBe(0);
    expect(await reopened.ownerStoredBytes("o")).toBe(0);
  });

  it("a log written before log keys is read, counted and purged under its session id", async () => {
    const path = file();
    const first = SqliteSessionStore.open(path);
    await longLog(first, "old", 100, 20);
    await answeredTurns(first, "old", 2);
    await first.create({ sessionId: "kept", owner: "o", model: "m" });
    await first.append("kept", [delta("kept words")]);
    await first.close();
    const old = new Database(path);
    old.exec(`${UNDO_LOG_KEYS} PRAGMA user_version = 10`);
    old.close();

    const store = open(path);
    expect(store.schemaMigration).toEqual({ from: 10, to: SCHEMA_VERSION });
    const read = await readWholeLog(store, "old");
    expect(read.status === "ok" && read.events.length).toBe(111);
    // its interactions are its log's (migration 12), found until it is cleared
    expect((await store.interaction("old-i1"))?.state).toBe("resolved");
    expect((await store.turnInteractions("old", "old-t0")).length).toBe(1);
    expect((await store.search("oldword40", 10)).map((hit) => hit.sessionId)).toEqual(["old"]);
    const kept = await storedBytes(store, "kept");
    expect(await store.ownerStoredBytes("o")).toBe((await storedBytes(store, "old")) + kept);
    // the count migration 11 took is what the clear takes out
    expect((await store.clear("old")).status).toBe("cleared");
    expect(await store.ownerStoredBytes("o")).toBe(kept);
    expect(await store.interaction("old-i1")).toBeNull();
    await store.purgesSettled();
    const db = rows(path);
    expect(db.interactions("old")).toBe(0);
    expect(db.abandonedEvents("old")).toBe(0);
    expect(db.abandonedSearchDocs("old")).toBe(0);
    expect(await store.ownerStoredBytes("o")).toBe(kept);
  });

  it("kill -9 right after a clear and a delete are acknowledged: the old epoch and the deleted session are never read again, and their purges finish", async () => {
    const path = file();
    const child = spawn(process.execPath, ["--import", "tsx", fixture, path], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stderr = "";
    child.stderr.on("data", (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    let epoch: string | undefined;
    let buffer = "";
    child.stdout.on("data", (chunk: Buffer) => {
      buffer += chunk.toString();
      const match = /^cleared (\S+)$/m.exec(buffer);
      if (match && epoch === undefined) {
        epoch = match[1];
        child.kill("SIGKILL");
      }
    });
    const exit = await new Promise<NodeJS.Signals | null>((resolve) =>
      child.on("exit", (_, signal) => resolve(signal)),
    );
    if (exit !== "SIGKILL") throw new Error(`the child ended on its own: ${stderr}`);

    const db = rows(path);
    // the purge was under way when the process died
    expect(db.purges()).toBe(2);
    expect(db.abandonedEvents("long")).toBeGreaterThan(0);
    expect([db.interactions("long"), db.interactions("zgone"), db.promptKeys("zgone")]).toEqual([20, 20, 20]);
    expect([db.jobs("zgone"), db.dismissals("zgone")]).toEqual([20, 2]);
    const store = open(path);
    expect(store.integrityCheck()).toBe("ok");
    // neither the old epoch's interactions nor the deleted session's are found, nor its prompt keys
    expect(await store.interaction("long-i0")).toBeNull();
    expect(await store.resolveInteraction("zgone-i0", { outcome: "deny" })).toEqual({ status: "not_found" });
    expect(await store.findPrompt("zgone", "zgone-c0")).toBeNull();
    expect(await store.isDismissed("zgone", "ann")).toBe(false);
    expect(await store.liveStatePage(null, 10)).toEqual({ sessions: [], next: null });
    const read = await readWholeLog(store, "long");
    expect(read.status === "ok" && [read.epoch, read.events.map((event) => event.data)]).toEqual([
      epoch,
      [{ turnId: "t", text: "the new epoch" }],
    ]);
    await store.purgesSettled();
    expect(db.purges()).toBe(0);
    expect(db.abandonedEvents("long")).toBe(0);
    expect([db.interactions("long"), db.interactions("zgone"), db.promptKeys("zgone")]).toEqual([0, 0, 0]);
    expect([db.jobs("zgone"), db.dismissals("zgone")]).toEqual([0, 0]);
    // a clear keeps the session's prompt keys
    expect(db.promptKeys("long")).toBe(20);
    expect(await store.ownerStoredBytes("o")).toBe(
      (await storedBytes(store, "long")) + (await storedBytes(store, "busy")),
    );
  }, 60_000);
});
