import Database from "better-sqlite3";
import { describe, expect, it, vi } from "vitest";
import { ATTACHMENT_CHUNK_BYTES } from "../../src/store/attachment-chunks.js";
import { type PurgeStep, SqlitePurger } from "../../src/store/sqlite-purger.js";
import { SqliteSessionStore } from "../../src/store/sqlite-store.js";
import type { WriteBatch } from "../../src/store/write-batch.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { tempDir } from "../support/temp-dir.js";
import { writeLeftToPurge } from "./purge-fixture.js";

const cleanups = cleanupsAfterEach(() => vi.restoreAllMocks());

/** What each step is measured on: the rows of every table a purge deletes from, by their order. */
const TABLES = [
  "events",
  "search_docs",
  "interactions",
  "prompt_keys",
  "jobs",
  "dismissals",
  "chunks",
  "attachments",
  "purges",
] as const;
type Table = (typeof TABLES)[number];

/** A file holding `writeLeftToPurge`'s sessions, whose purges no step has run yet. */
async function leftToPurge(): Promise<string> {
  const dir = tempDir("sessionmux-purge-steps-");
  cleanups.push(() => dir.remove());
  const path = dir.file("sessions.db");
  const held = vi.spyOn(SqlitePurger.prototype, "step").mockReturnValue(() => false);
  const store = SqliteSessionStore.open(path);
  await writeLeftToPurge(store);
  await store.close();
  held.mockRestore();
  return path;
}

/** The purger on its own connection to the file, each step run when the test says. */
function purgerOf(path: string, step?: Partial<PurgeStep>) {
  const db = new Database(path);
  cleanups.push(() => void db.close());
  const purger = new SqlitePurger(db, (op) => Promise.resolve(op({} as WriteBatch)), step);
  cleanups.push(() => purger.stop());
  const ids = (sql: string, ...params: unknown[]) =>
    db
      .prepare(sql)
      .pluck()
      .all(...params) as (string | number)[];
  const keyOf = (sessionId: string) =>
    (db
      .prepare("SELECT log_key FROM purges WHERE log_key = ? OR log_key LIKE ? || ':%'")
      .pluck()
      .get(sessionId, sessionId) as string | undefined) ??
    (db.prepare("SELECT log_key FROM projections WHERE session_id = ?").pluck().get(sessionId) as string);
  /** The rows a purge of the session would delete, or those the live session holds, by table. */
  const rows = (sessionId: string, key = keyOf(sessionId)): Record<Table, (string | number)[]> => ({
    events: ids("SELECT seq FROM events WHERE session_id = ? ORDER BY seq", key),
    search_docs: ids("SELECT id FROM search_docs WHERE session_id = ? ORDER BY id", key),
    interactions: ids(
      "SELECT interaction_id FROM interactions WHERE log_key = ? ORDER BY interaction_id",
      key,
    ),
    prompt_keys: ids("SELECT client_message_id FROM prompt_keys WHERE session_id = ? ORDER BY 1", sessionId),
    jobs: ids("SELECT job_id FROM jobs WHERE session_id = ? ORDER BY job_id", sessionId),
    dismissals: ids("SELECT principal FROM dismissals WHERE session_id = ? ORDER BY principal", sessionId),
    chunks: ids(
      `SELECT c.rowid FROM attachments a JOIN attachment_chunks c ON c.attachment_id = a.attachment_id
       WHERE a.session_id = ? ORDER BY c.rowid`,
      sessionId,
    ),
    attachments: ids("SELECT attachment_id FROM attachments WHERE session_id = ? ORDER BY 1", sessionId),
    purges: ids("SELECT log_key FROM purges WHERE log_key = ?", key),
  });
  return {
    db,
    purger,
    keyOf,
    rows,
    /** Runs one step; answers what it deleted, as `table: rows` for each table it changed. */
    async step(sessionId: string, key = keyOf(sessionId)): Promise<Record<string, (string | number)[]>> {
      const before = rows(sessionId, key);
      expect(await purger.step()({} as WriteBatch)).toBe(true);
      const after = rows(sessionId, key);
      const deleted: Record<string, (string | number)[]> = {};
      for (const table of TABLES) {
        const gone = before[table].filter((id) => !after[table].includes(id));
        if (gone.length > 0) deleted[table] = gone;
      }
      return deleted;
    },
    lengths: (sql: string, ...params: unknown[]) => ids(sql, ...params) as number[],
  };
}

describe("a purge's steps (SQLite): bounded, in order, one kind of row at a time, never a live row", () => {
  it("deletes a deleted session's rows a table at a time, each step the first `rows` of one table in its order, the purge row last", async () => {
    const path = await leftToPurge();
    const purging = purgerOf(path, { rows: 2, bytes: 1 << 30 });
    const key = purging.keyOf("gone");
    const all = purging.rows("gone");
    // what the fixture wrote: every kind of row a purge deletes, more of each than one step takes
    expect(Object.values(all).map((ids) => ids.length)).toEqual([38, 7, 3, 3, 3, 3, 3, 1, 1]);
    const kept = [purging.rows("kept"), purging.rows("gone-too")];
    // the step of each purge in the order of the rows in `purges` (the delete's first)
    const steps: Record<string, (string | number)[]>[] = [];
    for (let i = 0; i < 40 && purging.rows("gone", key).purges.length > 0; i++)
      steps.push(await purging.step("gone", key));
    const expected: Record<string, (string | number)[]>[] = [];
    for (const table of TABLES.slice(0, -2)) {
      for (let at = 0; at < all[table].length; at += 2)
        expected.push({ [table]: all[table].slice(at, at + 2) });
    }
    expected.push({ attachments: all.attachments }, { purges: all.purges });
    expect(steps).toEqual(expected);
    // the live sessions' rows, however alike their names, are all still there
    expect([purging.rows("kept"), purging.rows("gone-too")]).toEqual(kept);
    // the cleared session's purge is next: its old epoch only, never its prompt keys, jobs or
    // dismissals (the session lives), nor its new epoch's rows
    const clearedKey = purging.keyOf("zcleared");
    const old = purging.rows("zcleared", clearedKey);
    const liveKey = purging.db
      .prepare("SELECT log_key FROM projections WHERE session_id = 'zcleared'")
      .pluck()
      .get() as string;
    expect(liveKey).not.toBe(clearedKey);
    const live = purging.rows("zcleared", liveKey);
    expect(old.events.length).toBeGreaterThan(0);
    expect(live.events.length).toBe(1);
    const clearSteps: Record<string, (string | number)[]>[] = [];
    while (purging.rows("zcleared", clearedKey).purges.length > 0)
      clearSteps.push(await purging.step("zcleared", clearedKey));
    expect(clearSteps.flatMap((step) => Object.keys(step))).toEqual([
      ...Array(Math.ceil(old.events.length / 2)).fill("events"),
      ...Array(Math.ceil(old.search_docs.length / 2)).fill("search_docs"),
      ...Array(Math.ceil(old.interactions.length / 2)).fill("interactions"),
      "purges",
    ]);
    expect(purging.rows("zcleared", liveKey)).toEqual(live);
    // nothing left: a step says so, and deletes nothing
    expect(await purging.purger.step()({} as WriteBatch)).toBe(false);
    expect([purging.rows("kept"), purging.rows("gone-too")]).toEqual(kept);
  }, 60_000);

  it("a step stops at the first row that brings its bytes to the bound; a search step's bound is a sixteenth", async () => {
    const path = await leftToPurge();
    const probe = purgerOf(path);
    const key = probe.keyOf("gone");
    const events = probe.lengths("SELECT length(data) FROM events WHERE session_id = ? ORDER BY seq", key);
    const seqs = probe.rows("gone").events;
    // exactly the first two events' bytes: the second brings the step to the bound
    const exact = purgerOf(path, { rows: 100, bytes: events[0]! + events[1]! });
    expect(await exact.step("gone", key)).toEqual({ events: seqs.slice(0, 2) });
    // a byte short of the third's end: the third is the one that brings it there
    const short = purgerOf(path, { rows: 100, bytes: events[2]! + events[3]! + events[4]! - 1 });
    expect(await short.step("gone", key)).toEqual({ events: seqs.slice(2, 5) });
    // one byte: still one row a step
    expect(await purgerOf(path, { rows: 100, bytes: 0 }).step("gone", key)).toEqual({
      events: seqs.slice(5, 6),
    });
    expect(await purgerOf(path, { rows: 0 }).step("gone", key)).toEqual({ events: seqs.slice(6, 7) });
    // the defaults, 256 rows or 256 KiB: every event left goes in one step
    expect(await purgerOf(path).step("gone", key)).toEqual({ events: seqs.slice(7) });

    const docs = probe.lengths(
      `SELECT length(c.c0) FROM search_docs d JOIN search_fts_content c ON c.id = d.id
       WHERE d.session_id = ? ORDER BY d.id`,
      key,
    );
    const docIds = probe.rows("gone").search_docs;
    expect(docs.length).toBe(7);
    const search = purgerOf(path, { rows: 100, bytes: 16 * (docs[0]! + docs[1]!) });
    expect(await search.step("gone", key)).toEqual({ search_docs: docIds.slice(0, 2) });
    // the terms of each one deleted go with it: no search finds them
    const fts = (id: number | string) =>
      probe.db.prepare("SELECT count(*) FROM search_fts WHERE rowid = ?").pluck().get(id) as number;
    expect(docIds.map(fts)).toEqual([0, 0, 1, 1, 1, 1, 1]);
    const rowsBound = purgerOf(path, { rows: 3, bytes: 1 << 30 });
    expect(await rowsBound.step("gone", key)).toEqual({ search_docs: docIds.slice(2, 5) });
    expect(docIds.map(fts)).toEqual([0, 0, 0, 0, 0, 1, 1]);
  }, 60_000);

  it("once stopped (the store closing), no step follows the one already submitted", async () => {
    const path = await leftToPurge();
    const db = new Database(path);
    cleanups.push(() => void db.close());
    const submitted: (() => void)[] = [];
    let anotherStep: () => void = () => undefined;
    const stepsAfterStop = new Promise<string>((resolve) => {
      anotherStep = () => resolve("another step submitted");
    });
    const errors: unknown[] = [];
    const purger = new SqlitePurger(
      db,
      <R>(op: (batch: WriteBatch) => R) =>
        new Promise<R>((resolve) => {
          submitted.push(() => resolve(op({} as WriteBatch)));
          if (submitted.length > 1 || stopped) anotherStep();
        }),
      { rows: 2 },
      (err) => errors.push(err),
    );
    let stopped = false;
    purger.wake();
    expect(submitted).toHaveLength(1);
    purger.stop();
    stopped = true;
    // the step under way deletes its rows and says more are left
    submitted.shift()!();
    expect(await Promise.race([purger.settled().then(() => "settled"), stepsAfterStop])).toBe("settled");
    purger.wake();
    expect(await Promise.race([purger.settled().then(() => "settled"), stepsAfterStop])).toBe("settled");
    expect(submitted).toHaveLength(0);
    expect(errors).toEqual([]);
  });

  it("a step of chunks takes as many as the bytes hold (at least one, at most `rows`), then the attachments go", async () => {
    const path = await leftToPurge();
    const first = purgerOf(path, { rows: 1 << 20, bytes: 1 << 30 });
    const key = first.keyOf("gone");
    // everything before the chunks, a table a step
    for (let i = 0; i < 6; i++) await first.step("gone", key);
    const chunks = first.rows("gone").chunks;
    expect(first.rows("gone")).toMatchObject({
      jobs: [],
      dismissals: [],
      chunks: [chunks[0], chunks[1], chunks[2]],
    });
    expect(await purgerOf(path, { rows: 100, bytes: ATTACHMENT_CHUNK_BYTES - 1 }).step("gone", key)).toEqual({
      chunks: chunks.slice(0, 1),
    });
    expect(await purgerOf(path, { rows: 100, bytes: 2 * ATTACHMENT_CHUNK_BYTES }).step("gone", key)).toEqual({
      chunks: chunks.slice(1, 3),
    });
    const attachments = first.rows("gone").attachments;
    expect(await first.step("gone", key)).toEqual({ attachments });

    const again = await leftToPurge();
    const one = purgerOf(again, { rows: 1, bytes: 1 << 30 });
    const before = one.rows("gone");
    const rowsBefore = TABLES.slice(0, 6).reduce((sum, table) => sum + before[table].length, 0);
    for (let i = 0; i < rowsBefore; i++)
      expect(Object.values(await one.step("gone"))).toEqual([[expect.anything()]]);
    const left = one.rows("gone").chunks;
    expect(left.length).toBe(3);
    expect(await one.step("gone")).toEqual({ chunks: left.slice(0, 1) });
  }, 60_000);
});
