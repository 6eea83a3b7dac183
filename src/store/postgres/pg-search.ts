import type pg from "pg";
import { Limits } from "../../../protocol/index.js";
import { searchSnippet } from "../search-snippet.js";
import { searchTooBroad } from "../search-too-broad.js";
import { logKeyOf } from "./pg-log-key.js";
import { readQuery } from "./pg-read-query.js";
import { type SearchTerm, searchTerms } from "./pg-search-terms.js";

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

// A long message is indexed in pieces (see `searchChunks`): a message is one hit, with the snippet
// of its best matching piece.
const searchSql = (owned: boolean) => `SELECT "sessionId", seq, text FROM (
    SELECT p.session_id AS "sessionId", d.seq, d.text, d.id, ts_rank(d.tsv, q) AS rank,
      row_number() OVER (PARTITION BY d.session_id, d.seq ORDER BY ts_rank(d.tsv, q) DESC, d.id) AS nth
    FROM search_docs d ${CURRENT_JOIN}, to_tsquery('simple', $1) q
    WHERE d.tsv @@ q ${owned ? "AND p.owner = $3" : ""}
  ) hits WHERE nth = 1 ORDER BY rank DESC, id LIMIT $2`;
/** Indexed pieces that match, up to the bound (`LIMIT`): only as many as that are ranked. */
const matchesSql = (owned: boolean) => `SELECT count(*)::int AS matches FROM (
    SELECT 1 FROM search_docs d ${CURRENT_JOIN}, to_tsquery('simple', $1) q
    WHERE d.tsv @@ q ${owned ? "AND p.owner = $3" : ""} LIMIT $2) m`;
const SEARCH = searchSql(false);
const SEARCH_OWNED = searchSql(true);
const MATCHES = matchesSql(false);
const MATCHES_OWNED = matchesSql(true);

/**
 * Message text search over PostgreSQL full-text search; snippets mark hits with `**`. More matching
 * pieces than `Limits.maxSearchMatches` are refused before any is ranked, as on SQLite; with an
 * `owner`, only the pieces of its sessions count.
 */
export async function searchMessages(
  pool: pg.Pool,
  query: string,
  limit: number,
  owner?: string,
): Promise<{ sessionId: string; seq: number; snippet: string }[]> {
  const words = searchTerms(query);
  const match = toTsQuery(words);
  if (match === null) return [];
  const bound = Limits.maxSearchMatches + 1;
  const counted =
    owner === undefined
      ? await readQuery<{ matches: number }>(pool, MATCHES, [match, bound])
      : await readQuery<{ matches: number }>(pool, MATCHES_OWNED, [match, bound, owner]);
  if (counted.rows[0]!.matches > Limits.maxSearchMatches) throw searchTooBroad();
  const result =
    owner === undefined
      ? await readQuery(pool, SEARCH, [match, limit])
      : await readQuery(pool, SEARCH_OWNED, [match, limit, owner]);
  const hits: { sessionId: string; seq: number; snippet: string }[] = [];
  for (const { sessionId, seq, text } of result.rows as { sessionId: string; seq: number; text: string }[]) {
    // snippets are made on the event loop: it runs between a few of them, not after all 200
    if (hits.length > 0 && hits.length % SNIPPETS_PER_TURN === 0)
      await new Promise((resolve) => setImmediate(resolve));
    hits.push({ sessionId, seq, snippet: searchSnippet(text, words) });
  }
  return hits;
}

/** Snippets made between two turns of the event loop: each reads at most 8 Ki characters. */
const SNIPPETS_PER_TURN = 8;
