/**
 * Turns what a person typed into an FTS5 query that can never be a syntax error: every word
 * becomes a quoted phrase (quotes doubled), words are ANDed, and the last word matches as a
 * prefix so results follow typing. Words without a letter or digit are dropped because the
 * tokenizer would drop them too. Returns null when nothing searchable remains.
 */
export function toFtsQuery(input: string): string | null {
  const words = input
    .split(/\s+/u)
    .filter((word) => /[\p{L}\p{N}]/u.test(word))
    .slice(0, 32);
  if (words.length === 0) return null;
  return words
    .map((word, index) => `"${word.replaceAll('"', '""')}"${index === words.length - 1 ? "*" : ""}`)
    .join(" ");
}
