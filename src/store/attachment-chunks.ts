import { setImmediate as nextTurn } from "node:timers/promises";
import type Database from "better-sqlite3";
import { SessionmuxError } from "../../protocol/index.js";
import type { WriteOperation } from "./group-commit.js";
import { isStorageFailure, persistenceFailure } from "./io-errors.js";
import type { AttachmentInfo, StoredAttachment } from "./session-store.js";

/**
 * Bytes per stored chunk of an attachment. A reader holds one chunk at a time, and reading one
 * takes well under a millisecond, so a 10 MiB body never blocks the event loop in one go.
 */
export const ATTACHMENT_CHUNK_BYTES = 256 * 1024;

/** Chunks an upload writes per SQLite transaction (1 MiB). */
const CHUNKS_PER_TRANSACTION = 4;

/** Views of `bytes` in chunk-sized pieces, without copying. */
export function* chunksOf(bytes: Uint8Array): Generator<Buffer> {
  for (let at = 0; at < bytes.byteLength; at += ATTACHMENT_CHUNK_BYTES) {
    const end = Math.min(at + ATTACHMENT_CHUNK_BYTES, bytes.byteLength);
    yield Buffer.from(bytes.buffer, bytes.byteOffset + at, end - at);
  }
}

/** How many chunks an attachment of `size` bytes is stored in. */
export function chunkCount(size: number): number {
  return Math.ceil(size / ATTACHMENT_CHUNK_BYTES);
}

/** A body that vanished while it was read (its session deleted, or the upload expired). */
export function attachmentGone(attachmentId: string): SessionmuxError {
  return new SessionmuxError("attachment_not_found", `attachment ${attachmentId} was deleted while read`, {
    data: { attachmentId },
  });
}

/** Joins a body read chunk by chunk into the one buffer a whole-body reader wants. */
export async function readWhole(
  info: AttachmentInfo | null,
  chunks: (attachmentId: string) => AsyncIterable<Uint8Array>,
): Promise<StoredAttachment | null> {
  if (!info) return null;
  // Each chunk is copied in as it arrives, in its own event-loop turn: one copy of the whole body
  // at the end would block the loop for tens of milliseconds on a loaded machine.
  const bytes = new Uint8Array(info.size);
  let at = 0;
  for await (const chunk of chunks(info.attachmentId)) {
    if (at + chunk.byteLength > info.size) throw attachmentGone(info.attachmentId);
    bytes.set(chunk, at);
    at += chunk.byteLength;
  }
  if (at !== info.size) throw attachmentGone(info.attachmentId);
  return { ...info, bytes };
}

/** An `attachments` row without its bytes, as both stores select it. */
export interface AttachmentInfoRow {
  attachment_id: string;
  owner: string;
  session_id: string | null;
  name: string;
  type: string;
  size: number;
}

export function attachmentInfoOf(row: AttachmentInfoRow): AttachmentInfo {
  const { attachment_id: attachmentId, owner, session_id: sessionId, name, type, size } = row;
  return { attachmentId, owner, sessionId, name, type, size };
}

/**
 * A stored body, chunk by chunk as its consumer asks (`chunkAt` fetches one by index); ends with
 * `attachment_not_found` if the upload is gone (`info` null) or a chunk vanishes while it is read.
 */
export async function* storedChunks(
  attachmentId: string,
  info: AttachmentInfo | null,
  chunkAt: (index: number) => Promise<Buffer | undefined>,
): AsyncGenerator<Uint8Array> {
  if (!info) throw attachmentGone(attachmentId);
  const count = chunkCount(info.size);
  for (let index = 0; index < count; index++) {
    const chunk = await chunkAt(index);
    if (!chunk) throw attachmentGone(attachmentId);
    yield new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength);
  }
}

/**
 * Attachment bodies of the SQLite store, kept as rows of `attachment_chunks` (a trigger deletes
 * them with their `attachments` row). Written in the uploading transaction; read one chunk per
 * event-loop turn, so a request streams its body with backpressure instead of copying it whole.
 */
export class SqliteAttachmentChunks {
  readonly #insertInfo: Database.Statement;
  readonly #insertChunk: Database.Statement;
  readonly #info: Database.Statement;
  readonly #chunk: Database.Statement;
  readonly #delete: Database.Statement;
  readonly #deleteUnreferenced: Database.Statement;
  readonly #deleteChunks: Database.Statement;

  constructor(db: Database.Database) {
    this.#insertInfo = db.prepare(
      `INSERT INTO attachments (attachment_id, owner, session_id, name, type, size, bytes, created_at)
       VALUES (?, ?, NULL, ?, ?, ?, x'', ?)`,
    );
    this.#insertChunk = db.prepare(
      "INSERT INTO attachment_chunks (attachment_id, idx, bytes) VALUES (?, ?, ?)",
    );
    this.#delete = db.prepare("DELETE FROM attachments WHERE attachment_id = ?");
    this.#deleteUnreferenced = db.prepare(
      "DELETE FROM attachments WHERE attachment_id = ? AND session_id IS NULL",
    );
    this.#deleteChunks = db.prepare("DELETE FROM attachment_chunks WHERE attachment_id = ?");
    // a deleted session's attachments are gone from the delete on, though the purger deletes them later
    this.#info = db.prepare(
      `SELECT attachment_id, owner, session_id, name, type, size FROM attachments a WHERE attachment_id = ?
       AND NOT EXISTS (SELECT 1 FROM purges WHERE session_id = a.session_id)`,
    );
    this.#chunk = db
      .prepare(
        `SELECT c.bytes FROM attachment_chunks c JOIN attachments a ON a.attachment_id = c.attachment_id
         WHERE c.attachment_id = ? AND c.idx = ? AND NOT EXISTS (SELECT 1 FROM purges WHERE session_id = a.session_id)`,
      )
      .pluck();
  }

  /**
   * Stores one upload: its row with the first chunks, then the rest a few chunks per transaction,
   * so the synchronous writes of a 10 MiB body never hold the event loop in one go. The id is
   * answered only once every chunk is in, and ids are unguessable, so nobody reads a partial
   * body; one a crash leaves behind is unreferenced and expires like any upload.
   */
  async put(
    id: string,
    input: { owner: string; name: string; type: string; bytes: Uint8Array },
    now: number,
    submit: <R>(op: WriteOperation<R>) => Promise<R>,
  ): Promise<string> {
    const chunks = [...chunksOf(input.bytes)];
    const insert = (from: number) => {
      const end = Math.min(from + CHUNKS_PER_TRANSACTION, chunks.length);
      for (let index = from; index < end; index++) this.#insertChunk.run(id, index, chunks[index]);
    };
    await submit(() => {
      this.#insertInfo.run(id, input.owner, input.name, input.type, input.bytes.byteLength, now);
      insert(0);
    });
    try {
      for (let from = CHUNKS_PER_TRANSACTION; from < chunks.length; from += CHUNKS_PER_TRANSACTION) {
        await submit(() => {
          // swept meanwhile (an upload slower than the upload lifetime): keep no orphan chunks
          if (!this.#info.get(id)) throw attachmentGone(id);
          insert(from);
        });
      }
    } catch (err) {
      await submit(() => {
        this.#delete.run(id);
        this.#deleteChunks.run(id);
      }).catch(() => undefined);
      throw err;
    }
    return id;
  }

  /** The write that deletes an upload no message references (its chunks follow by trigger). */
  discard(attachmentId: string): WriteOperation<void> {
    return () => {
      this.#deleteUnreferenced.run(attachmentId);
    };
  }

  info(attachmentId: string): Promise<AttachmentInfo | null> {
    return guarded(() => {
      const row = this.#info.get(attachmentId) as AttachmentInfoRow | undefined;
      return row ? attachmentInfoOf(row) : null;
    });
  }

  /** The body, one chunk per event-loop turn; ends with `attachment_not_found` if it vanishes. */
  async *chunks(attachmentId: string): AsyncGenerator<Uint8Array> {
    yield* storedChunks(attachmentId, await this.info(attachmentId), async (index) => {
      if (index > 0) await nextTurn();
      return guarded(() => this.#chunk.get(attachmentId, index) as Buffer | undefined);
    });
  }
}

function guarded<T>(run: () => T): Promise<T> {
  try {
    return Promise.resolve(run());
  } catch (err) {
    return Promise.reject(isStorageFailure(err) ? persistenceFailure(err) : err);
  }
}
