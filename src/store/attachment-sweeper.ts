import type Database from "better-sqlite3";

/** Rows deleted per step, so a sweep of many large uploads never holds the event loop long. */
const STEP_ROWS = 4;

/**
 * Uploads not yet referenced by a prompt (`session_id IS NULL`): what a principal holds of them
 * (for the upload quota), and their expiry. Deleted rows free their pages, which SQLite reuses
 * for later writes, so the file stops growing. Runs on the store's own connection: each
 * statement is its own transaction, between the store's group commits.
 */
export class AttachmentSweeper {
  readonly #pendingBytes: Database.Statement;
  readonly #expire: Database.Statement;
  #timer: NodeJS.Timeout | undefined;

  constructor(db: Database.Database) {
    this.#pendingBytes = db.prepare(
      "SELECT COALESCE(SUM(size), 0) AS bytes FROM attachments WHERE owner = ? AND session_id IS NULL",
    );
    this.#expire = db.prepare(
      `DELETE FROM attachments WHERE attachment_id IN (
         SELECT attachment_id FROM attachments WHERE session_id IS NULL AND created_at < ? LIMIT ${STEP_ROWS})`,
    );
  }

  /** Bytes of `owner`'s uploads that no prompt references yet. */
  pendingBytes(owner: string): Promise<number> {
    return Promise.resolve((this.#pendingBytes.get(owner) as { bytes: number }).bytes);
  }

  /** Deletes unreferenced uploads created before `before` (ms), a few rows per event-loop turn. */
  async sweep(before: number): Promise<number> {
    let deleted = 0;
    for (;;) {
      const { changes } = this.#expire.run(before);
      deleted += changes;
      if (changes < STEP_ROWS) return deleted;
      await new Promise((resolve) => setImmediate(resolve));
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
