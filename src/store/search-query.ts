import { indexedForm, longEnoughForPrefix } from "./indexed-word.js";

/**
 * Turns what a person typed into an FTS5 query that can never be a syntax error: every word
 * becomes a quoted phrase (quotes doubled), words are ANDed, and the last word matches as a
 * prefix so results follow typing, once its last run of letters and digits is long enough
 * (`longEnoughForPrefix`: a prefix reads every indexed word starting with it). Words without a letter or digit are
 * dropped because the tokenizer would drop them too, and a word typed again (as indexed) is
 * sent once. Returns null when nothing searchable remains. `prefixAllowed` false: the last word
 * matches whole too (see `searchPrefixWords`).
 */
export function toFtsQuery(input: string, prefixAllowed = true): string | null {
  const words = input
    .split(/\s+/u)
    .filter((word) => /[\p{L}\p{N}]/u.test(word))
    .slice(0, 32);
  if (words.length === 0) return null;
  const prefix = prefixAllowed && endsInPrefix(words[words.length - 1]!);
  // A word typed again adds nothing to what matches, but FTS5 ranks each phrase against every
  // place any phrase matches: 32 copies of a word in 6,000 long messages ranked for 11 s.
  const phrases = new Map<string, string>();
  words.forEach((word, index) => {
    const last = index === words.length - 1 && prefix;
    const key = `${indexedForm(word)}${last ? "*" : ""}`;
    if (!phrases.has(key)) phrases.set(key, `"${word.replaceAll('"', '""')}"${last ? "*" : ""}`);
  });
  return [...phrases.values()].join(" ");
}

/** The word's last run of letters and digits is long enough to match as a prefix. */
function endsInPrefix(word: string): boolean {
  const runs = word.match(/[\p{L}\p{N}]+/gu) ?? [];
  return longEnoughForPrefix(runs[runs.length - 1] ?? "");
}
