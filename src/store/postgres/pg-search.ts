import type pg from "pg";

/** Words longer than this are not words a person searches for; PostgreSQL refuses very long ones. */
const MAX_WORD = 100;
const MAX_WORDS = 32;

/**
 * Turns what a person typed into a `to_tsquery` text that can never be a syntax error: only runs
 * of letters and digits are kept (every tsquery operator is punctuation), each is quoted, words
 * are ANDed and the last matches as a prefix so results follow typing, as in the SQLite store.
 * A word cut to `MAX_WORD` matches as a prefix too, or a pasted token longer than that would
 * match nothing wherever it stood. Returns null when nothing searchable remains.
 */
export function toTsQuery(input: string): string | null {
  const words = (input.match(/[\p{L}\p{N}]+/gu) ?? []).slice(0, MAX_WORDS);
  if (words.length === 0) return null;
  return words
    .map((word, index) => {
      const prefix = index === words.length - 1 || word.length > MAX_WORD;
      return `'${word.slice(0, MAX_WORD)}'${prefix ? ":*" : ""}`;
    })
    .join(" & ");
}

const HEADLINE = "'StartSel=**, StopSel=**, MaxWords=12, MinWords=6, ShortWord=0'";
const SEARCH = `SELECT d.session_id AS "sessionId", d.seq, ts_headline('simple', d.text, q, ${HEADLINE}) AS snippet
  FROM search_docs d, to_tsquery('simple', $1) q WHERE d.tsv @@ q ORDER BY ts_rank(d.tsv, q) DESC, d.id LIMIT $2`;
const SEARCH_OWNED = `SELECT d.session_id AS "sessionId", d.seq, ts_headline('simple', d.text, q, ${HEADLINE}) AS snippet
  FROM search_docs d JOIN sessions s ON s.session_id = d.session_id, to_tsquery('simple', $1) q
  WHERE d.tsv @@ q AND s.owner = $3 ORDER BY ts_rank(d.tsv, q) DESC, d.id LIMIT $2`;

/** Message text search over PostgreSQL full-text search; snippets mark hits with `**`. */
export async function searchMessages(
  pool: pg.Pool,
  query: string,
  limit: number,
  owner?: string,
): Promise<{ sessionId: string; seq: number; snippet: string }[]> {
  const match = toTsQuery(query);
  if (match === null) return [];
  const result =
    owner === undefined
      ? await pool.query(SEARCH, [match, limit])
      : await pool.query(SEARCH_OWNED, [match, limit, owner]);
  return result.rows as { sessionId: string; seq: number; snippet: string }[];
}
