import type Database from "better-sqlite3";
import type { SearchTerm } from "./postgres/pg-search-terms.js";

/**
 * 10,000 — indexed words a search's last word may start (in the host's whole index) for it to
 * match as a prefix; one that starts more matches whole words only, as a shorter one does. FTS5
 * reads every word that starts with a prefix, and merges the messages each is in, before it counts
 * one match: a principal whose messages held 300,000 words starting `zzq` had each search for
 * `zzq` hold a read thread for 1 s (about 3 µs a word), whatever its few matches. Not refused:
 * others' words would then deny a principal the search of any word it types. Not in `Limits`:
 * no client needs it, and the browser bundle carries every entry of `Limits`.
 */
export const SEARCH_PREFIX_MAX_WORDS = 10_000;

/**
 * The words FTS5 holds, one row per word, on each connection that runs searches (the store's own
 * and its read thread's): a temporary table, nothing of it stored in the file.
 */
export const SEARCH_VOCABULARY_SQL =
  "CREATE VIRTUAL TABLE IF NOT EXISTS temp.search_vocab USING fts5vocab(main, search_fts, row)";

/**
 * Indexed words that start with the prefix (given twice), up to the limit: the upper end is the prefix followed by the
 * last code point, so FTS5 reads only the words in that range, in order, and stops at the limit.
 */
export const PREFIX_WORDS_SQL = `SELECT count(*) FROM (SELECT 1 FROM temp.search_vocab
  WHERE term >= ? AND term < ? || char(1114111) LIMIT ?)`;

export function registerSearchVocabulary(db: Database.Database): void {
  // `query_only` (a read-only store) refuses even a temporary table, which writes nothing to the file
  const queryOnly = db.pragma("query_only", { simple: true }) === 1;
  if (queryOnly) db.pragma("query_only = OFF");
  try {
    db.exec(SEARCH_VOCABULARY_SQL);
  } finally {
    if (queryOnly) db.pragma("query_only = ON");
  }
}

/** The run a search's last word matches as a prefix, if any (see `searchTerms`). */
export function prefixOf(words: SearchTerm[][]): string | undefined {
  const last = words.at(-1)?.at(-1);
  return last?.prefix ? last.text : undefined;
}

/** The terms with their last run matched whole, as the query is once its prefix starts too many words. */
export function withoutPrefix(words: SearchTerm[][]): SearchTerm[][] {
  return words.map((runs, index) =>
    index < words.length - 1
      ? runs
      : runs.map((run, at) => (at < runs.length - 1 ? run : { ...run, prefix: false })),
  );
}
