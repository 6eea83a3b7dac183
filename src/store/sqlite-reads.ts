import type Database from "better-sqlite3";
import { Limits, type SessionEvent } from "../../protocol/index.js";
import { type EncodedRow, encodeEventArrays, readBudget } from "./encoded-event-arrays.js";
import { decodeValue } from "./event-codec.js";
import type { ReadAsker } from "./fair-turns.js";
import type { ListQueries } from "./list-query.js";
import { decodeRow, type StoredRow } from "./log-writer.js";
import { searchTerms } from "./postgres/pg-search-terms.js";
import { publicProjection } from "./projection.js";
import type { ReadCache } from "./read-cache.js";
import { prefixOf, SEARCH_PREFIX_MAX_WORDS, withoutPrefix } from "./search-prefix-words.js";
import { toFtsQuery } from "./search-query.js";
import { ranksMatches } from "./search-rank-budget.js";
import { searchTooBroad } from "./search-too-broad.js";
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
import { type EncodedPageRow, LARGE_EVENT_BYTES } from "./sqlite-event-encoding.js";
import type { ReadMode, SqliteReadThread } from "./sqlite-read-thread.js";
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
    /** Where client-sized reads run (see `search`); none: on this thread. */
    private readonly thread?: SqliteReadThread,
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
      const rows = withinItemBudget(
        this.statements.eventsAfter.iterate(state.logKey, query.afterSeq, query.limit),
      );
      events = rows.map(decodeRow);
      hasMore = (events[events.length - 1]?.seq ?? state.headSeq) < state.headSeq;
    } else {
      const before = query.beforeSeq ?? state.headSeq + 1;
      const rows = withinItemBudget(this.statements.eventsBefore.iterate(state.logKey, before, query.limit));
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
    // With no large event among them, `limit` events fit the budget unmeasured (the rule of the
    // encoded read's cut, `PAGE_END`): the plain read, which takes every row at once, costs about
    // 7% less than stepping through them
    const small =
      limit * LARGE_EVENT_BYTES <= Limits.eventItemBytes && this.noLargeEvent(state.logKey, afterSeq, limit);
    const rows = small
      ? (this.statements.eventsAfter.all(state.logKey, afterSeq, limit) as StoredRow[])
      : withinItemBudget(this.statements.eventsAfter.iterate(state.logKey, afterSeq, limit));
    let dataBytes = 0;
    for (const row of rows) dataBytes += row.data.byteLength;
    return {
      status: "ok",
      epoch: state.epoch,
      headSeq: state.headSeq,
      events: rows.map(decodeRow),
      dataBytes,
    };
  }

  /** None of the `limit` events after `afterSeq` is in `events_large`: one index probe. */
  private noLargeEvent(logKey: string, afterSeq: number, limit: number): boolean {
    const first = this.statements.firstLargeAfter.get({ sessionId: logKey, afterSeq }) as number | null;
    return first === null || first > afterSeq + limit;
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
    // One query per array, each array written whole by SQLite and closed at `eventItemBytes` of
    // data (`readBudget`). Reads never interleave with a commit here: the head read with the state
    // is the log's, so the read ends there.
    const step = Math.max(1, Math.floor(perArray));
    const budget = readBudget(limit, step);
    const arrays: Uint8Array[] = [];
    let count = 0;
    let bytes = 0;
    let lastSeq = afterSeq;
    while (count < limit && bytes < budget && lastSeq < state.headSeq) {
      const want = Math.min(step, limit - count);
      const [n, last, unencodable, array] = this.statements.eventsAfterEncoded.get({
        envelope: envelope ?? EMPTY,
        sessionId: state.logKey,
        afterSeq: lastSeq,
        limit: want,
        // the read's last array closes at what is left of its budget
        maxBytes: Math.min(Limits.eventItemBytes, budget - bytes),
      }) as EncodedPageRow;
      if (n === 0 || last === null || array === null) break;
      if (unencodable) {
        const rows = this.statements.eventsAfterRaw.all(state.logKey, lastSeq, n) as EncodedRow[];
        arrays.push(...encodeEventArrays(rows, n, envelope));
      } else arrays.push(array);
      bytes += array.length;
      count += n;
      lastSeq = last;
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

  /**
   * Message text search; any input is safe (see `toFtsQuery`). Snippets mark hits with `**`.
   * A last word that starts more indexed words than `SEARCH_PREFIX_MAX_WORDS` matches whole,
   * never expanded. Matches past `Limits.maxSearchMatches` are refused before any is ranked: ranking costs about
   * as much per match as the rest of the search together. With an `owner`, only its matches count
   * and are ranked: what others hold changes nothing of what it may search. FTS5 knows no owner,
   * so others' matches between the owner's first and last indexed message are still read past,
   * not ranked. Matches whose text passes the ranked text's budget for the query's words
   * (`ranksMatches`) come newest first, unranked. With a read thread, all of it runs there, off the
   * event loop, each statement in `asker`'s turn (see `SqliteReadThread`).
   */
  async search(query: string, limit: number, owner?: string, asker?: ReadAsker): Promise<SearchHit[]> {
    let match = toFtsQuery(query);
    if (match === null) return [];
    let words = searchTerms(query);
    const prefix = prefixOf(words);
    if (prefix !== undefined) {
      const cap = SEARCH_PREFIX_MAX_WORDS;
      const count = await this.runRead<number>(
        this.statements.searchPrefixWords,
        "pluck",
        [prefix, prefix, cap + 1],
        asker,
      );
      if (count > cap) {
        match = toFtsQuery(query, false)!;
        words = withoutPrefix(words);
      }
    }
    const terms = JSON.stringify(words);
    const bound = Limits.maxSearchMatches + 1;
    if (owner === undefined) {
      const { matches, bytes } = await this.runRead<Matched>(
        this.statements.searchMatches,
        "get",
        [match, bound],
        asker,
      );
      if (matches > Limits.maxSearchMatches) throw searchTooBroad();
      const statement = ranksMatches(bytes, words) ? this.statements.search : this.statements.searchNewest;
      return this.runRead<SearchHit[]>(statement, "all", [terms, match, limit], asker);
    }
    const { lo, hi } = await this.runRead<{ lo: number | null; hi: number | null }>(
      this.statements.searchOwnedRange,
      "get",
      [owner],
      asker,
    );
    if (lo === null || hi === null) return [];
    const { matches, bytes } = await this.runRead<Matched>(
      this.statements.searchMatchesOwned,
      "get",
      [match, lo, hi, owner, bound],
      asker,
    );
    if (matches > Limits.maxSearchMatches) throw searchTooBroad();
    const statement = ranksMatches(bytes, words)
      ? this.statements.searchOwned
      : this.statements.searchOwnedNewest;
    return this.runRead<SearchHit[]>(statement, "all", [terms, match, lo, hi, owner, limit], asker);
  }

  /** On the read thread when the store has one, in `asker`'s turn, else here. */
  private runRead<T>(
    statement: Database.Statement,
    mode: ReadMode,
    params: readonly unknown[],
    asker?: ReadAsker,
  ): Promise<T> {
    if (this.thread) return this.thread.run<T>(statement, mode, params, asker);
    return Promise.resolve((mode === "all" ? statement.all(...params) : statement.get(...params)) as T);
  }

  isRetired(sessionId: string): boolean {
    return this.statements.tombstone.get(sessionId) !== undefined;
  }

  ownerStoredBytes(owner: string): number {
    return (this.statements.ownerStoredBytes.get(owner) as number | undefined) ?? 0;
  }

  findPrompt(sessionId: string, clientMessageId: string): PromptRecord | null {
    const stored = this.statements.findPrompt.get(sessionId, clientMessageId) as Uint8Array | undefined;
    return stored ? decodeValue<PromptRecord>(stored) : null;
  }

  /**
   * Read-only: the writer's own object when it holds the session. Every read of its events goes by
   * the state's `logKey`, so none reads an epoch a clear left to the purger.
   */
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

type SearchHit = { sessionId: string; seq: number; snippet: string };
/** A search's matches up to the bound, and the UTF-8 bytes of their text. */
type Matched = { matches: number; bytes: number };

/**
 * The rows of a page or a log read up to the one whose data reaches `Limits.eventItemBytes`
 * (counted from the cursor's side): a page of large events stays one message a client can take,
 * and `hasMore` (a read: its head) says where it goes on.
 */
function withinItemBudget(rows: IterableIterator<unknown>): StoredRow[] {
  const taken: StoredRow[] = [];
  let bytes = 0;
  for (const row of rows as IterableIterator<StoredRow>) {
    taken.push(row);
    bytes += row.data.byteLength;
    // leaving the loop closes the statement's iterator
    if (bytes >= Limits.eventItemBytes) break;
  }
  return taken;
}
