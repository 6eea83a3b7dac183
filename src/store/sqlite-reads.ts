import type { SessionEvent } from "../../protocol/index.js";
import { type EncodedRow, encodeEventArrays } from "./encoded-event-arrays.js";
import { decodeValue } from "./event-codec.js";
import type { ListQueries } from "./list-query.js";
import { decodeRow, type StoredRow } from "./log-writer.js";
import { publicProjection } from "./projection.js";
import type { ReadCache } from "./read-cache.js";
import { toFtsQuery } from "./search-query.js";
import { headerOf, type SessionStateRow, stateFromRow } from "./session-state.js";
import type {
  EncodedReadOutcome,
  HeaderOutcome,
  ListQuery,
  PageOutcome,
  PageQuery,
  PromptRecord,
  ReadOutcome,
  SessionProjection,
  StoredAttachment,
} from "./session-store.js";
import type { Statements } from "./sqlite-statements.js";

/**
 * The log reads of the SQLite store, synchronous (the store wraps each in a promise). Session
 * state and encoded reads come through the store's read cache, cleared at every commit.
 */
export class SqliteReads {
  constructor(
    private readonly statements: Statements,
    private readonly lists: ListQueries,
    private readonly cache: ReadCache,
  ) {}

  header(sessionId: string): HeaderOutcome {
    const row = this.stateRow(sessionId);
    if (!row) return this.missing(sessionId);
    const state = stateFromRow(row);
    return { status: "ok", header: headerOf(state), headSeq: state.headSeq };
  }

  projection(sessionId: string): SessionProjection | null {
    const row = this.stateRow(sessionId);
    return row ? publicProjection(stateFromRow(row).projection) : null;
  }

  /** Ascending events; no cursor = the newest `limit` (the tail). */
  page(sessionId: string, query: PageQuery): PageOutcome {
    const row = this.stateRow(sessionId);
    if (!row) return this.missing(sessionId);
    const state = stateFromRow(row);
    let events: SessionEvent[];
    let hasMore: boolean;
    if (query.afterSeq !== undefined) {
      const rows = this.statements.eventsAfter.all(sessionId, query.afterSeq, query.limit) as StoredRow[];
      events = rows.map(decodeRow);
      hasMore = (events[events.length - 1]?.seq ?? state.headSeq) < state.headSeq;
    } else {
      const before = query.beforeSeq ?? state.headSeq + 1;
      const rows = this.statements.eventsBefore.all(sessionId, before, query.limit) as StoredRow[];
      events = rows.reverse().map(decodeRow);
      hasMore = (events[0]?.seq ?? 1) > 1;
    }
    return {
      status: "ok",
      header: headerOf(state),
      epoch: state.epoch,
      headSeq: state.headSeq,
      events,
      hasMore,
      projection: publicProjection(state.projection),
    };
  }

  readAfter(sessionId: string, afterSeq: number, limit: number): ReadOutcome {
    const row = this.stateRow(sessionId);
    if (!row) return this.missing(sessionId);
    const rows = this.statements.eventsAfter.all(sessionId, afterSeq, limit) as StoredRow[];
    return { status: "ok", epoch: row.epoch, headSeq: row.head_seq, events: rows.map(decodeRow) };
  }

  readAfterEncoded(
    sessionId: string,
    afterSeq: number,
    limit: number,
    perArray: number,
    envelope?: Uint8Array,
  ): EncodedReadOutcome {
    const key = this.cache.encodedReadKey(sessionId, afterSeq, limit, perArray, envelope);
    const cached = this.cache.encodedRead(key);
    if (cached !== undefined) return cached;
    const row = this.stateRow(sessionId);
    if (!row) return this.missing(sessionId);
    const rows = this.statements.eventsAfterRaw.all(sessionId, afterSeq, limit) as EncodedRow[];
    const outcome = {
      status: "ok" as const,
      epoch: row.epoch,
      headSeq: row.head_seq,
      count: rows.length,
      lastSeq: rows[rows.length - 1]?.[0] ?? afterSeq,
      arrays: encodeEventArrays(rows, perArray, envelope),
    };
    this.cache.keepEncodedRead(key, outcome);
    return outcome;
  }

  list(query: ListQuery): { rows: SessionProjection[]; next?: string } {
    return this.lists.run(query);
  }

  /** Message text search; any input is safe (see `toFtsQuery`). Snippets mark hits with `**`. */
  search(
    query: string,
    limit: number,
    owner?: string,
  ): { sessionId: string; seq: number; snippet: string }[] {
    const match = toFtsQuery(query);
    if (match === null) return [];
    const statement = owner === undefined ? this.statements.search : this.statements.searchOwned;
    const params = owner === undefined ? [match, limit] : [match, owner, limit];
    return statement.all(...params) as { sessionId: string; seq: number; snippet: string }[];
  }

  isRetired(sessionId: string): boolean {
    return this.statements.tombstone.get(sessionId) !== undefined;
  }

  findPrompt(sessionId: string, clientMessageId: string): PromptRecord | null {
    const stored = this.statements.findPrompt.get(sessionId, clientMessageId) as Uint8Array | undefined;
    return stored ? decodeValue<PromptRecord>(stored) : null;
  }

  getAttachment(attachmentId: string): StoredAttachment | null {
    const row = this.statements.attachment.get(attachmentId) as
      | {
          attachment_id: string;
          owner: string;
          session_id: string | null;
          name: string;
          type: string;
          size: number;
          bytes: Buffer;
        }
      | undefined;
    if (!row) return null;
    const { attachment_id: id, owner, session_id: sessionId, name, type, size, bytes } = row;
    // The row's Buffer is already this read's own copy: no second one.
    return {
      attachmentId: id,
      owner,
      sessionId,
      name,
      type,
      size,
      bytes: new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength),
    };
  }

  private stateRow(sessionId: string): SessionStateRow | undefined {
    return this.cache.state(
      sessionId,
      () => this.statements.sessionState.get(sessionId) as SessionStateRow | undefined,
    );
  }

  private missing(sessionId: string): { status: "retired" } | { status: "not_found" } {
    return this.statements.tombstone.get(sessionId) !== undefined
      ? { status: "retired" }
      : { status: "not_found" };
  }
}
