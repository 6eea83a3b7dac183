import { indexedForm, longEnoughForPrefix } from "../indexed-word.js";

/** Words longer than this are not words a person searches for; PostgreSQL refuses very long ones. */
export const MAX_WORD = 100;
const MAX_WORDS = 32;

/** A run of letters and digits of the query, as it must match an indexed word. */
export interface SearchTerm {
  /** In `indexedForm`, at most `MAX_WORD` characters. */
  text: string;
  /** Matches any word that starts with it (the last one typed, if long enough; one cut to `MAX_WORD`). */
  prefix: boolean;
}

/**
 * What a person typed, read as the SQLite store reads it: the first 32 words (split at white
 * space, those without a letter or digit dropped), each as its runs of letters and digits
 * (`README.md` is `readme` then `md`), in `indexedForm`; the last run of the last word matches as a
 * prefix so results follow typing, when it is long enough (`longEnoughForPrefix`). Empty when nothing searchable remains.
 */
export function searchTerms(input: string): SearchTerm[][] {
  const words = indexedForm(input)
    .split(/\s+/u)
    .map((word) => word.match(/[\p{L}\p{N}]+/gu) ?? [])
    .filter((runs) => runs.length > 0)
    .slice(0, MAX_WORDS);
  return words.map((runs, index) =>
    runs.map((run, at) => ({
      text: run.slice(0, MAX_WORD),
      prefix:
        (index === words.length - 1 && at === runs.length - 1 && longEnoughForPrefix(run)) ||
        run.length > MAX_WORD,
    })),
  );
}
