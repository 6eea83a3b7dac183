import type pg from "pg";
import { type AttachmentInfoRow, attachmentInfoOf, chunksOf, storedChunks } from "../attachment-chunks.js";
import type { AttachmentInfo } from "../session-store.js";
import { readQuery } from "./pg-read-query.js";
import type { PgWriteOperation } from "./pg-write-operations.js";

const INSERT_INFO = `INSERT INTO attachments (attachment_id, owner, session_id, name, type, size, bytes, created_at)
  VALUES ($1, $2, NULL, $3, $4, $5, '\\x', $6)`;
const INSERT_CHUNK = "INSERT INTO attachment_chunks (attachment_id, idx, bytes) VALUES ($1, $2, $3)";
// a deleted session's attachments are gone from the delete on, though the purger deletes them later
const INFO = `SELECT attachment_id, owner, session_id, name, type, size FROM attachments a WHERE attachment_id = $1
  AND NOT EXISTS (SELECT 1 FROM purges g WHERE g.session_id = a.session_id)`;
const CHUNK = `SELECT c.bytes FROM attachment_chunks c JOIN attachments a ON a.attachment_id = c.attachment_id
  WHERE c.attachment_id = $1 AND c.idx = $2 AND NOT EXISTS (SELECT 1 FROM purges g WHERE g.session_id = a.session_id)`;
const DISCARD = "DELETE FROM attachments WHERE attachment_id = $1 AND session_id IS NULL";

/**
 * Attachment bodies of the PostgreSQL store, kept as rows of `attachment_chunks` (deleted with
 * their `attachments` row by the foreign key). A reader fetches one chunk per query when its
 * consumer asks, so no request holds a whole body.
 */
export class PgAttachmentChunks {
  constructor(private readonly pool: pg.Pool) {}

  /** The write of one upload: its row and all its chunks, in one transaction. */
  put(
    id: string,
    input: { owner: string; name: string; type: string; bytes: Uint8Array },
    now: () => number,
  ): PgWriteOperation<string> {
    return {
      sessions: [],
      run: async (batch) => {
        await batch.execute(INSERT_INFO, [
          id,
          input.owner,
          input.name,
          input.type,
          input.bytes.byteLength,
          now(),
        ]);
        let index = 0;
        for (const chunk of chunksOf(input.bytes)) await batch.execute(INSERT_CHUNK, [id, index++, chunk]);
        return id;
      },
    };
  }

  /** The write that deletes an upload no message references (its chunks follow by the foreign key). */
  discard(attachmentId: string): PgWriteOperation<void> {
    return {
      sessions: [],
      run: async (batch) => {
        await batch.execute(DISCARD, [attachmentId]);
      },
    };
  }

  async info(attachmentId: string): Promise<AttachmentInfo | null> {
    const row = (await readQuery<AttachmentInfoRow>(this.pool, INFO, [attachmentId])).rows[0];
    return row ? attachmentInfoOf(row) : null;
  }

  /** The body, one query per chunk; ends with `attachment_not_found` if it vanishes. */
  async *chunks(attachmentId: string): AsyncGenerator<Uint8Array> {
    yield* storedChunks(
      attachmentId,
      await this.info(attachmentId),
      async (index) =>
        (await readQuery<{ bytes: Buffer }>(this.pool, CHUNK, [attachmentId, index])).rows[0]?.bytes,
    );
  }
}
