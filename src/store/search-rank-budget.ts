import type { SearchTerm } from "./postgres/pg-search-terms.js";

/**
 * The most text one search ranks, in UTF-8 bytes of its matching messages times its distinct
 * words: 64 Mi, so 64 MiB of matches for one word, 2 MiB for 32. Ranking reads every place each
 * word stands in each match, and FTS5's `bm25` takes each place once per word of the query: 10,000
 * messages of 16,000 characters, each dense with the 32 words of the query, held the SQLite read
 * thread 2.7–3.9 s per search, every other search waiting behind it. A search past the budget
 * gives its matches newest first, which reads none of them.
 */
export const RANKED_TEXT_BUDGET = 64 * 1024 * 1024;

/** Whether matches of `bytes` of text are ranked for these words (distinct: a word typed again counts once). */
export function ranksMatches(bytes: number, words: readonly (readonly SearchTerm[])[]): boolean {
  const distinct = new Set(words.map((runs) => JSON.stringify(runs))).size;
  return bytes * distinct <= RANKED_TEXT_BUDGET;
}
