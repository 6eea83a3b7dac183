import type pg from "pg";
import { Limits } from "../../../protocol/index.js";
import type { FairTurns, ReadAsker } from "../fair-turns.js";
import { ranksMatches } from "../search-rank-budget.js";
import { searchSnippet } from "../search-snippet.js";
import { searchTooBroad } from "../search-too-broad.js";
import { boundedReadOn, isStatementTimeout } from "./pg-bounded-read.js";
import { logKeyOf } from "./pg-log-key.js";
import { type SearchTerm, searchTerms } from "./pg-search-terms.js";
import { SEARCH_STATEMENT_TIMEOUT_MS, searchTimedOut } from "./pg-search-timeout.js";

/**
 * The `to_tsquery` text of the terms, which can never be a syntax error: each is quoted (every
 * tsquery operator is punctuation, and a term holds none), the runs of one word must follow each
 * other as a phrase (`<->`), words are ANDed. Null when there is no term.
 */
export function toTsQuery(words: readonly (readonly SearchTerm[])[]): string | null {
  if (words.length === 0) return null;
  return words
    .map((runs) => runs.map((run) => `'${run.text}'${run.prefix ? ":*" : ""}`).join(" <-> "))
    .join(" & ");
}

// A piece is stored under its log's key (the session id, or `<sessionId>:<epoch>` after a clear; no
// session id holds ':'): it counts only while that key is its session's current one, so the rows a
// clear or a delete left to the purger are never found. An owner's sessions through its projections
// (every live session has one): their index by owner lets a principal with few sessions be searched
// from them, not from every principal's matches.
const CURRENT_JOIN = `JOIN projections p ON p.session_id = split_part(d.session_id, ':', 1)
  AND d.session_id = ${logKeyOf("p")}`;

/**
 * The query's runs ORed, each once, for `ts_rank` alone: ranked against the words ANDed, as they
 * are matched, `ts_rank` weighs every pair of words by the distance between each place of one and
 * each of the other, so 10,000 pieces of 16,000 characters dense with 32 words took about 23 ms
 * each, some 4 minutes for a search, the database's backend running on after its client left. ORed,
 * it reads each place of each word once (PostgreSQL keeps at most 256 of a word per piece):
 * 0.2 s for all 10,000. A message then ranks by how often it holds the words, as FTS5's `bm25`
 * ranks it on SQLite; one word ranks as it did.
 */
export function toRankQuery(words: readonly (readonly SearchTerm[])[]): string {
  const runs = new Set(words.flatMap((word) => word.map((run) => `'${run.text}'${run.prefix ? ":*" : ""}`)));
  return [...runs].join(" | ");
}

// A long message is indexed in pieces (see `searchChunks`): a message is one hit, with the snippet
// of its best matching piece (newest first: of its first one).
const searchSql = (owned: boolean) => `SELECT "sessionId", seq, text FROM (
    SELECT p.session_id AS "sessionId", d.seq, d.text, d.id, ts_rank(d.tsv, r) AS rank,
      row_number() OVER (PARTITION BY d.session_id, d.seq ORDER BY ts_rank(d.tsv, r) DESC, d.id) AS nth
    FROM search_docs d ${CURRENT_JOIN}, to_tsquery('simple', $1) q, to_tsquery('simple', $${owned ? 4 : 3}) r
    WHERE d.tsv @@ q ${owned ? "AND p.owner = $3" : ""}
  ) hits WHERE nth = 1 ORDER BY rank DESC, id LIMIT $2`;
/** Past the ranked text's budget: the newest messages first, nothing ranked. */
const newestSql = (owned: boolean) => `SELECT "sessionId", seq, text FROM (
    SELECT p.session_id AS "sessionId", d.seq, d.text, d.id,
      row_number() OVER (PARTITION BY d.session_id, d.seq ORDER BY d.id) AS nth
    FROM search_docs d ${CURRENT_JOIN}, to_tsquery('simple', $1) q
    WHERE d.tsv @@ q ${owned ? "AND p.owner = $3" : ""}
  ) hits WHERE nth = 1 ORDER BY id DESC LIMIT $2`;
/**
 * Indexed pieces that match, up to the bound (`LIMIT`): only as many as that are ranked; and the
 * UTF-8 bytes of their text (`octet_length` reads a stored text's length, not the text).
 */
const matchesSql = (owned: boolean) => `SELECT count(*)::int AS matches,
      coalesce(sum(octet_length(m.text)), 0)::float8 AS bytes FROM (
    SELECT d.text FROM search_docs d ${CURRENT_JOIN}, to_tsquery('simple', $1) q
    WHERE d.tsv @@ q ${owned ? "AND p.owner = $3" : ""} LIMIT $2) m`;
const SEARCH = searchSql(false);
const SEARCH_OWNED = searchSql(true);
const NEWEST = newestSql(false);
const NEWEST_OWNED = newestSql(true);
const MATCHES = matchesSql(false);
const MATCHES_OWNED = matchesSql(true);

/**
 * Message text search over PostgreSQL full-text search; snippets mark hits with `**`. More matching
 * pieces than `Limits.maxSearchMatches` are refused before any is ranked, as on SQLite; with an
 * `owner`, only the pieces of its sessions count. Pieces whose text passes the ranked text's budget
 * for the query's words (`ranksMatches`) come newest first, unranked, as on SQLite. Each statement
 * runs at most `timeoutMs` on the database, which cancels it past that: the search is then
 * `overloaded` (see `searchTimedOut`). With `turns`, the search takes its connection only in
 * `asker`'s turn (see `FairTurns`), so searches hold no more connections than its slots, and one
 * whose asker left while it waited never takes one.
 */
export async function searchMessages(
  pool: pg.Pool,
  query: string,
  limit: number,
  options: SearchOptions = {},
): Promise<{ sessionId: string; seq: number; snippet: string }[]> {
  const { owner, timeoutMs = SEARCH_STATEMENT_TIMEOUT_MS, turns, asker = { name: "" } } = options;
  const words = searchTerms(query);
  const match = toTsQuery(words);
  if (match === null) return [];
  const bound = Limits.maxSearchMatches + 1;
  const params = owner === undefined ? [match, limit] : [match, limit, owner];
  const read = () => boundedReadOn(pool, timeoutMs, rankedOn);
  const rankedOn = async (client: pg.PoolClient) => {
    const counted =
      owner === undefined
        ? await client.query<Matched>(MATCHES, [match, bound])
        : await client.query<Matched>(MATCHES_OWNED, [match, bound, owner]);
    const { matches, bytes } = counted.rows[0]!;
    // answered, not thrown: a read that throws gives up its connection
    if (matches > Limits.maxSearchMatches) return null;
    const result = ranksMatches(bytes, words)
      ? await client.query<Hit>(owner === undefined ? SEARCH : SEARCH_OWNED, [...params, toRankQuery(words)])
      : await client.query<Hit>(owner === undefined ? NEWEST : NEWEST_OWNED, params);
    return result.rows;
  };
  const rows = await (turns ? turns.run(asker, read) : read()).catch((err: unknown) => {
    throw isStatementTimeout(err) ? searchTimedOut(timeoutMs) : err;
  });
  if (rows === null) throw searchTooBroad();
  const hits: { sessionId: string; seq: number; snippet: string }[] = [];
  for (const { sessionId, seq, text } of rows) {
    // snippets are made on the event loop: it runs between a few of them, not after all 200
    if (hits.length > 0 && hits.length % SNIPPETS_PER_TURN === 0)
      await new Promise((resolve) => setImmediate(resolve));
    hits.push({ sessionId, seq, snippet: searchSnippet(text, words) });
  }
  return hits;
}

/** Whose search it is, how long its statements may run, and the turns it takes its connection in. */
export interface SearchOptions {
  /** Only this principal's sessions are searched. */
  owner?: string;
  /** @default SEARCH_STATEMENT_TIMEOUT_MS */
  timeoutMs?: number;
  /** The turns searches take connections in; none: at once. */
  turns?: FairTurns;
  /** @default the host's own (no name) */
  asker?: ReadAsker;
}

/** A matching piece as the search reads it. */
type Hit = { sessionId: string; seq: number; text: string };
/** A search's matching pieces up to the bound, and the UTF-8 bytes of their text. */
type Matched = { matches: number; bytes: number };

/** Snippets made between two turns of the event loop: each reads at most 8 Ki characters. */
const SNIPPETS_PER_TURN = 8;
