import type { SessionEvent } from "../../protocol/index.js";
import { type EncodedRow, encodeEventArrays } from "./encoded-event-arrays.js";
import { decodeValue } from "./event-codec.js";
import type { ListQueries } from "./list-query.js";
import { decodeRow, type StoredRow } from "./log-writer.js";
import { publicProjection } from "./projection.js";
import type { ReadCache } from "./read-cache.js";
import { toFtsQuery } from "./search-query.js";
import { headerOf, type SessionState, type SessionStateRow, stateFromRow } from "./session-state.js";
import type {
  EncodedReadOutcome,
  HeaderOutcome,
  ListQuery,
  PageOutcome,
  PageQuery,
  PromptRecord,
  ReadOutcome,
  SessionProjection,
} from "./session-store.js";
import type { EncodedPageRow } from "./sqlite-event-encoding.js";
import type { Statements } from "./sqlite-statements.js";

const EMPTY = new Uint8Array(0);

/**
 * The log reads of the SQLite store, synchronous (the store wraps each in a promise). Session
 * state comes from the writer's view when it holds the session (see `LogWriter.committed`), else
 * through the store's read cache, cleared at every commit, as encoded reads are.
 */
export class SqliteReads {
  constructor(
    private readonly statements: Statements,
    private readonly lists: ListQueries,
    private readonly cache: ReadCache,
    private readonly committed: (sessionId: string) => SessionState | undefined,
  ) {}

  header(sessionId: string): HeaderOutcome {
    const state = this.state(sessionId);
    if (!state) return this.missing(sessionId);
    return { status: "ok", header: headerOf(state), headSeq: state.headSeq };
  }

  projection(sessionId: string): SessionProjection | null {
    const state = this.state(sessionId);
    return state ? publicProjection(state.projection) : null;
  }

  /** Ascending events; no cursor = the newest `limit` (the tail). */
  page(sessionId: string, query: PageQuery): PageOutcome {
    const state = this.state(sessionId);
    if (!state) return this.missing(sessionId);
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
    const state = this.state(sessionId);
    if (!state) return this.missing(sessionId);
    const rows = this.statements.eventsAfter.all(sessionId, afterSeq, limit) as StoredRow[];
    return { status: "ok", epoch: state.epoch, headSeq: state.headSeq, events: rows.map(decodeRow) };
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
    const state = this.state(sessionId);
    if (!state) return this.missing(sessionId);
    // one query per array, each array written whole by SQLite; reads never interleave with a commit here
    const step = Math.max(1, Math.floor(perArray));
    const arrays: Uint8Array[] = [];
    let count = 0;
    let lastSeq = afterSeq;
    while (count < limit) {
      const want = Math.min(step, limit - count);
      const [n, last, unencodable, array] = this.statements.eventsAfterEncoded.get(
        envelope ?? EMPTY,
        sessionId,
        lastSeq,
        want,
      ) as EncodedPageRow;
      if (n === 0 || last === null || array === null) break;
      if (unencodable) {
        const rows = this.statements.eventsAfterRaw.all(sessionId, lastSeq, want) as EncodedRow[];
        arrays.push(...encodeEventArrays(rows, want, envelope));
      } else arrays.push(array);
      count += n;
      lastSeq = last;
      if (n < want) break;
    }
    const outcome = {
      status: "ok" as const,
      epoch: state.epoch,
      headSeq: state.headSeq,
      count,
      lastSeq,
      arrays,
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

  /** Read-only: the writer's own object when it holds the session. */
  private state(sessionId: string): SessionState | undefined {
    const committed = this.committed(sessionId);
    if (committed) return committed;
    const row = this.cache.state(
      sessionId,
      () => this.statements.sessionState.get(sessionId) as SessionStateRow | undefined,
    );
    return row ? stateFromRow(row) : undefined;
  }

  private missing(sessionId: string): { status: "retired" } | { status: "not_found" } {
    return this.statements.tombstone.get(sessionId) !== undefined
      ? { status: "retired" }
      : { status: "not_found" };
  }
}
