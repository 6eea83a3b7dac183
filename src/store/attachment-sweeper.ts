import { setImmediate as nextTurn } from "node:timers/promises";
import type Database from "better-sqlite3";
import { UPLOAD_MIN_COUNTED_BYTES } from "./upload-counted-bytes.js";

/** Rows deleted per step, so a sweep of many large uploads never holds the event loop long. */
const STEP_ROWS = 4;
/** Free pages given back to the file system per step (1 MiB of 4 KiB pages). */
const STEP_PAGES = 256;

/**
 * Uploads not yet referenced by a prompt (`session_id IS NULL`): what a principal holds of them
 * (for the upload quota), and their expiry. Deleted rows free their pages, which SQLite reuses
 * for later writes, so the file stops growing. Runs on the store's own connection: each
 * statement is its own transaction, between the store's group commits.
 */
export class AttachmentSweeper {
  readonly #pendingBytes: Database.Statement;
  readonly #expire: Database.Statement;
  readonly #db: Database.Database;
  readonly #incremental: boolean;
  #timer: NodeJS.Timeout | undefined;

  constructor(db: Database.Database) {
    this.#db = db;
    // 2 = INCREMENTAL; a file created before it was the default stays at 0 (NONE)
    this.#incremental = db.pragma("auto_vacuum", { simple: true }) === 2;
    this.#pendingBytes = db.prepare(
      `SELECT COALESCE(SUM(MAX(size, ${UPLOAD_MIN_COUNTED_BYTES})), 0) AS bytes
       FROM attachments WHERE owner = ? AND session_id IS NULL`,
    );
    this.#expire = db.prepare(
      `DELETE FROM attachments WHERE attachment_id IN (
         SELECT attachment_id FROM attachments WHERE session_id IS NULL AND created_at < ? LIMIT ${STEP_ROWS})`,
    );
  }

  /** Bytes of `owner`'s uploads that no prompt references yet, each counted at least `UPLOAD_MIN_COUNTED_BYTES`. */
  pendingBytes(owner: string): Promise<number> {
    return Promise.resolve((this.#pendingBytes.get(owner) as { bytes: number }).bytes);
  }

  /**
   * Deletes unreferenced uploads created before `before` (ms), a few rows per event-loop turn,
   * then gives the freed pages back to the file system, a bounded number per turn.
   */
  async sweep(before: number): Promise<number> {
    let deleted = 0;
    for (;;) {
      const { changes } = this.#expire.run(before);
      deleted += changes;
      if (changes < STEP_ROWS) break;
      await nextTurn();
    }
    if (deleted > 0) await this.#shrink();
    return deleted;
  }

  async #shrink(): Promise<void> {
    if (!this.#incremental) return;
    // bounded even if writers free pages as fast as this gives them back
    for (let step = 0; step < 1024; step++) {
      if ((this.#db.pragma("freelist_count", { simple: true }) as number) === 0) return;
      this.#db.pragma(`incremental_vacuum(${STEP_PAGES})`);
      await nextTurn();
    }
  }

  /** Sweeps uploads older than `ttlMs` every `intervalMs`; `onError` hears a failed sweep. */
  start(ttlMs: number, intervalMs: number, onError: (err: unknown) => void, now = Date.now): void {
    this.stop();
    this.#timer = setInterval(() => {
      this.sweep(now() - ttlMs).catch(onError);
    }, intervalMs);
    this.#timer.unref();
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }
}
