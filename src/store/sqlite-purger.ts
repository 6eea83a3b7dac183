import type Database from "better-sqlite3";
import { ATTACHMENT_CHUNK_BYTES } from "./attachment-chunks.js";
import type { WriteOperation } from "./group-commit.js";
import { PurgeRuns } from "./purge-runs.js";

/**
 * How much one purge step deletes: up to `rows` rows, stopping at the first that brings the
 * step's data to `bytes` (a step deletes at least one row). Deleting a row frees its overflow
 * pages, which SQLite reads to find them, so the bytes bound what a step costs.
 */
export interface PurgeStep {
  rows: number;
  bytes: number;
}

/**
 * 256 rows or 256 KiB: a step measured at 0.7 ms (median), 4.5 ms (99th percentile) of writer
 * time, on a 500 MB log of 200 kB messages, which went in 2,500 steps (18 s). At 1 MiB its 99th
 * percentile was twice that.
 */
export const DEFAULT_PURGE_STEP: PurgeStep = { rows: 256, bytes: 256 * 1024 };

/** The step's bytes divided by this: the text of indexed documents one step deletes. */
const SEARCH_BYTES_SHARE = 16;

/**
 * Deletes what clears and deletes left behind (the `purges` table, migration 11): the events,
 * search rows and interactions stored under an abandoned log key (migration 12), and a deleted
 * session's prompt keys, ended jobs, dismissals and attachments. Each step
 * is one bounded write in the store's group commit, so it shares a transaction with whatever
 * else is queued and never holds the writer or the event loop for long; steps follow one per
 * event-loop turn until nothing is left. A purge row goes last, in the step that finds nothing
 * more under its key, so after a crash the purge resumes where it was (the store wakes the purger
 * when it opens). Nothing reads these rows meanwhile: every read goes by a session's current key.
 */
export class SqlitePurger {
  readonly #next: Database.Statement;
  readonly #events: RowsInOrder;
  readonly #searchDocs: Database.Statement;
  readonly #deleteSearchText: Database.Statement;
  readonly #deleteSearchDoc: Database.Statement;
  readonly #interactions: RowsInOrder;
  readonly #prompts: RowsInOrder;
  readonly #jobs: RowsInOrder;
  readonly #dismissals: RowsInOrder;
  readonly #chunks: Database.Statement;
  readonly #deleteChunk: Database.Statement;
  readonly #deleteAttachments: Database.Statement;
  readonly #deletePurge: Database.Statement;
  readonly #step: PurgeStep;
  readonly #runs: PurgeRuns;

  constructor(
    db: Database.Database,
    submit: <R>(op: WriteOperation<R>) => Promise<R>,
    step: Partial<PurgeStep> = {},
    onError: (err: unknown) => void = () => undefined,
  ) {
    this.#runs = new PurgeRuns(() => submit(this.step()), onError);
    this.#step = {
      rows: Math.max(1, step.rows ?? DEFAULT_PURGE_STEP.rows),
      bytes: Math.max(1, step.bytes ?? DEFAULT_PURGE_STEP.bytes),
    };
    this.#next = db.prepare("SELECT log_key, session_id FROM purges LIMIT 1");
    this.#events = rowsInOrder(db, "events", "session_id", "seq", "length(data)");
    // an FTS5 delete reads the document's text back to remove its terms: its length is its cost
    this.#searchDocs = db
      .prepare(
        `SELECT d.id, coalesce(length(c.c0), 0) FROM search_docs d LEFT JOIN search_fts_content c ON c.id = d.id
         WHERE d.session_id = ? LIMIT ?`,
      )
      .raw();
    this.#deleteSearchText = db.prepare("DELETE FROM search_fts WHERE rowid = ?");
    this.#deleteSearchDoc = db.prepare("DELETE FROM search_docs WHERE id = ?");
    // interactions_by_log_key holds the primary key too: both read in the key's order
    this.#interactions = rowsInOrder(
      db,
      "interactions",
      "log_key",
      "interaction_id",
      "length(body) + coalesce(length(resolution), 0)",
    );
    this.#prompts = rowsInOrder(db, "prompt_keys", "session_id", "client_message_id", "length(record)");
    // a deleted session's ended jobs and its dismissals, read in the order of their index by
    // session (jobs_by_session, dismissals_by_session: each holds its table's key)
    this.#jobs = rowsInOrder(db, "jobs", "session_id", "job_id", "length(label)");
    this.#dismissals = rowsInOrder(db, "dismissals", "session_id", "principal", "length(principal)");
    this.#chunks = db
      .prepare(
        `SELECT c.rowid FROM attachments a JOIN attachment_chunks c ON c.attachment_id = a.attachment_id
         WHERE a.session_id = ? LIMIT ?`,
      )
      .pluck();
    this.#deleteChunk = db.prepare("DELETE FROM attachment_chunks WHERE rowid = ?");
    // their chunks are gone by now, so the trigger deletes none; their bytes were counted out at
    // the delete, and the trigger that counts a deleted attachment out skips a purged session's
    this.#deleteAttachments = db.prepare(
      "DELETE FROM attachments WHERE attachment_id IN (SELECT attachment_id FROM attachments WHERE session_id = ? LIMIT ?)",
    );
    this.#deletePurge = db.prepare("DELETE FROM purges WHERE log_key = ?");
  }

  /** Starts deleting, if it is not already; a run ends once nothing is left. */
  wake(): void {
    this.#runs.wake();
  }

  /** Resolves when the current run ends (at once when none runs). */
  settled(): Promise<void> {
    return this.#runs.settled();
  }

  /** No step starts after this; one already submitted settles with the group commit. */
  stop(): void {
    this.#runs.stop();
  }

  /** One bounded step of the first purge left; answers whether one may be left after it. */
  step(): WriteOperation<boolean> {
    return () => {
      const purge = this.#next.get() as { log_key: string; session_id: string | null } | undefined;
      if (!purge) return false;
      const { log_key: key, session_id: sessionId } = purge;
      if (this.#through(this.#events, key) || this.#search(key)) return true;
      if (this.#through(this.#interactions, key)) return true;
      if (sessionId !== null) {
        if (this.#through(this.#prompts, sessionId)) return true;
        if (this.#through(this.#jobs, sessionId)) return true;
        if (this.#through(this.#dismissals, sessionId)) return true;
        if (this.#attachments(sessionId)) return true;
      }
      this.#deletePurge.run(key);
      return true;
    };
  }

  /**
   * Deletes the first of `rows` under `key` in their order, up to the step's rows or bytes, through
   * the last one read.
   */
  #through({ lengths, deleteThrough }: RowsInOrder, key: string): boolean {
    let bytes = 0;
    let last: number | string | undefined;
    for (const [id, length] of lengths.iterate(key, this.#step.rows) as Iterable<[number | string, number]>) {
      last = id;
      bytes += length;
      if (bytes >= this.#step.bytes) break;
    }
    if (last === undefined) return false;
    deleteThrough.run(key, last);
    return true;
  }

  /**
   * Deleting an indexed text costs about what indexing it did, per word: far more per byte than
   * freeing an event's pages (a 16,000-character message about 2 ms), so its share of the step's
   * bytes is a sixteenth.
   */
  #search(key: string): boolean {
    const docs: number[] = [];
    const budget = this.#step.bytes / SEARCH_BYTES_SHARE;
    let bytes = 0;
    for (const [id, length] of this.#searchDocs.iterate(key, this.#step.rows) as Iterable<[number, number]>) {
      docs.push(id);
      bytes += length;
      if (bytes >= budget) break;
    }
    for (const id of docs) {
      this.#deleteSearchText.run(id);
      this.#deleteSearchDoc.run(id);
    }
    return docs.length > 0;
  }

  #attachments(sessionId: string): boolean {
    const perStep = Math.max(
      1,
      Math.min(this.#step.rows, Math.floor(this.#step.bytes / ATTACHMENT_CHUNK_BYTES)),
    );
    const chunks = this.#chunks.all(sessionId, perStep) as number[];
    for (const rowid of chunks) this.#deleteChunk.run(rowid);
    if (chunks.length > 0) return true;
    return this.#deleteAttachments.run(sessionId, this.#step.rows).changes > 0;
  }
}

/** A table's rows under one key, read in an order an index holds, each with its data's length. */
interface RowsInOrder {
  /** `[order, length]` of the first rows under the key (`?`), at most `?` of them. */
  lengths: Database.Statement;
  /** Deletes the rows under the key (`?`) up to an order (`?`), that one included. */
  deleteThrough: Database.Statement;
}

function rowsInOrder(
  db: Database.Database,
  table: string,
  key: string,
  order: string,
  length: string,
): RowsInOrder {
  return {
    lengths: db
      .prepare(`SELECT ${order}, ${length} FROM ${table} WHERE ${key} = ? ORDER BY ${order} LIMIT ?`)
      .raw(),
    deleteThrough: db.prepare(`DELETE FROM ${table} WHERE ${key} = ? AND ${order} <= ?`),
  };
}
