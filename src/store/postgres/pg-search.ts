import type pg from "pg";
import { searchSnippet } from "./pg-search-snippet.js";
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

const SEARCH = `SELECT d.session_id AS "sessionId", d.seq, d.text
  FROM search_docs d, to_tsquery('simple', $1) q WHERE d.tsv @@ q ORDER BY ts_rank(d.tsv, q) DESC, d.id LIMIT $2`;
const SEARCH_OWNED = `SELECT d.session_id AS "sessionId", d.seq, d.text
  FROM search_docs d JOIN sessions s ON s.session_id = d.session_id, to_tsquery('simple', $1) q
  WHERE d.tsv @@ q AND s.owner = $3 ORDER BY ts_rank(d.tsv, q) DESC, d.id LIMIT $2`;

/** Message text search over PostgreSQL full-text search; snippets mark hits with `**`. */
export async function searchMessages(
  pool: pg.Pool,
  query: string,
  limit: number,
  owner?: string,
): Promise<{ sessionId: string; seq: number; snippet: string }[]> {
  const words = searchTerms(query);
  const match = toTsQuery(words);
  if (match === null) return [];
  const result =
    owner === undefined
      ? await pool.query(SEARCH, [match, limit])
      : await pool.query(SEARCH_OWNED, [match, limit, owner]);
  return (result.rows as { sessionId: string; seq: number; text: string }[]).map(
    ({ sessionId, seq, text }) => ({
      sessionId,
      seq,
      snippet: searchSnippet(text, words),
    }),
  );
}
