import { indexedForm } from "./indexed-word.js";
import type { SearchTerm } from "./postgres/pg-search-terms.js";

/**
 * About 12 words of `text` around its hits, as both stores show them: each place a typed word
 * matches (all its runs in a row: `README.md` is `readme` then `md`) between `**` and `**`, the
 * window holding the most hits with them in its middle, `…` where the text was cut. Words are runs
 * of letters and digits, as the index reads them; what stands between them is shown as written.
 * (PostgreSQL's `ts_headline` parses `README.md` as one word and would mark nothing; FTS5's
 * `snippet` scores every hit against every other, so a long answer full of one searched word held
 * the SQLite read thread for minutes.) A text longer than 8 Ki characters is read from the piece of
 * that length around the first place its lower case holds a typed word's first run (or from its
 * start), so a hit costs what that piece does however long its message.
 */
export function searchSnippet(text: string, query: readonly (readonly SearchTerm[])[]): string {
  return snippetOf(text, query, indexedForm);
}

/**
 * `searchSnippet`, self-contained: it names nothing outside itself but its arguments, so the
 * SQLite read thread runs it from its source text (see `SqliteReadThread`). It declares no
 * function of its own either: a loader that names functions (tsx) would call its helper there.
 */
export function snippetOf(
  text: string,
  query: readonly (readonly SearchTerm[])[],
  form: (word: string) => string,
): string {
  // the words a snippet shows, as FTS5's `snippet(…, 12)`
  const SNIPPET_WORDS = 12;
  // at most this much of the text is read, so a search of 200 hits reads at most 1.6 Mi characters
  const PIECE_CHARS = 8192;
  // Distinct phrases, those that start with a whole word found by it: at each word of the text a
  // lookup, not a comparison with every phrase of the query.
  const byFirst = new Map<string, (readonly SearchTerm[])[]>();
  const prefixed: (readonly SearchTerm[])[] = [];
  const seen = new Set<string>();
  for (const runs of query) {
    const key = JSON.stringify(runs);
    if (runs.length === 0 || seen.has(key)) continue;
    seen.add(key);
    if (runs[0]!.prefix) prefixed.push(runs);
    else byFirst.set(runs[0]!.text, [...(byFirst.get(runs[0]!.text) ?? []), runs]);
  }
  // A longer text is read from a piece holding its first typed word (as written in lower case,
  // found by the engine's own search); none found: from its start.
  let from = 0;
  if (text.length > PIECE_CHARS) {
    const lower = text.toLowerCase();
    let first = -1;
    for (const runs of query) {
      const at = runs.length > 0 ? lower.indexOf(runs[0]!.text) : -1;
      if (at >= 0 && (first < 0 || at < first)) first = at;
    }
    if (first > PIECE_CHARS / 2) from = Math.min(first - PIECE_CHARS / 2, text.length - PIECE_CHARS);
  }
  const piece = text.slice(from, from + PIECE_CHARS);
  const cutBefore = from > 0;
  const cutAfter = from + piece.length < text.length;
  // a letter's combining accents stay with it, as the index drops them
  const words: { start: number; end: number; text: string }[] = [];
  for (const found of piece.matchAll(/[\p{L}\p{N}][\p{L}\p{N}\p{M}]*/gu)) {
    const start = found.index;
    // a word the piece cut into is not shown as a word
    if ((cutBefore && start === 0) || (cutAfter && start + found[0].length === piece.length)) continue;
    words.push({ start, end: start + found[0].length, text: form(found[0]) });
  }
  if (words.length === 0) return cutBefore || cutAfter ? "…" : text;
  const hit = new Array<boolean>(words.length).fill(false);
  const spans: [number, number][] = [];
  for (let i = 0; i < words.length; i++) {
    for (const runs of [byFirst.get(words[i]!.text), prefixed]) {
      for (const phrase of runs ?? []) {
        if (i + phrase.length > words.length) continue;
        const found = phrase.every((run, at) =>
          run.prefix ? words[i + at]!.text.startsWith(run.text) : words[i + at]!.text === run.text,
        );
        if (found) spans.push([i, i + phrase.length - 1]);
      }
    }
  }
  // in order of their first word (found in that order, and a prefix phrase never sorts them out)
  spans.sort((a, b) => a[0] - b[0]);
  const joined: [number, number][] = [];
  for (const span of spans) {
    const last = joined.at(-1);
    if (last && span[0] <= last[1]) last[1] = Math.max(last[1], span[1]);
    else joined.push(span);
  }
  for (const [first, last] of joined) for (let i = first; i <= last; i++) hit[i] = true;
  // the earliest window of SNIPPET_WORDS words holding the most matched words, moved so that its
  // hits stand in its middle
  let start = 0;
  let best = 0;
  let bestCount = 0;
  let inWindow = 0;
  for (let i = 0; i < words.length; i++) {
    if (hit[i]) inWindow++;
    if (i >= SNIPPET_WORDS && hit[i - SNIPPET_WORDS]) inWindow--;
    if (inWindow > bestCount) {
      bestCount = inWindow;
      best = Math.max(0, i - SNIPPET_WORDS + 1);
    }
  }
  if (bestCount > 0) {
    const limit = Math.min(words.length, best + SNIPPET_WORDS);
    let first = best;
    while (!hit[first]) first++;
    let last = limit - 1;
    while (!hit[last]) last--;
    const centred = first - Math.floor((SNIPPET_WORDS - (last - first + 1)) / 2);
    start = Math.max(0, Math.min(centred, words.length - SNIPPET_WORDS));
  }
  const end = Math.min(words.length, start + SNIPPET_WORDS);
  const shownSpans = joined.filter(([first, last]) => last >= start && first < end);
  const opens = new Set(shownSpans.map(([first]) => Math.max(first, start)));
  const closes = new Set(shownSpans.map(([, last]) => Math.min(last, end - 1)));
  let snippet = start === 0 && !cutBefore ? piece.slice(0, words[0]!.start) : "…";
  for (let i = start; i < end; i++) {
    const word = words[i]!;
    const shown = piece.slice(word.start, word.end);
    snippet += `${opens.has(i) ? "**" : ""}${shown}${closes.has(i) ? "**" : ""}`;
    if (i + 1 < end) snippet += piece.slice(word.end, words[i + 1]!.start);
  }
  return end === words.length && !cutAfter ? snippet + piece.slice(words[end - 1]!.end) : `${snippet}…`;
}
