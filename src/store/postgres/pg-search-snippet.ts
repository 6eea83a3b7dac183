import { indexedForm } from "../indexed-word.js";
import type { SearchTerm } from "./pg-search-terms.js";

/** Words a snippet shows, as the SQLite store's `snippet(…, 12)`. */
const SNIPPET_WORDS = 12;

interface Word {
  start: number;
  end: number;
  text: string;
}

/**
 * About 12 words of `text` around its hits, as the SQLite store's FTS5 `snippet` shows them: each
 * place a typed word matches (all its runs in a row: `README.md` is `readme` then `md`) between `**`
 * and `**`, the window holding the most hits with them in its middle, `…` where the text was cut.
 * Words are runs of letters and digits, as the index reads them; what stands between them is shown
 * as written. (PostgreSQL's `ts_headline` parses `README.md` as one word and would mark nothing.)
 */
export function searchSnippet(text: string, query: readonly (readonly SearchTerm[])[]): string {
  // a letter's combining accents stay with it, as the index drops them
  const words: Word[] = [...text.matchAll(/[\p{L}\p{N}][\p{L}\p{N}\p{M}]*/gu)].map((found) => ({
    start: found.index,
    end: found.index + found[0].length,
    text: indexedForm(found[0]),
  }));
  if (words.length === 0) return text;
  const spans = matchedSpans(words, query);
  const start = windowStart(words.length, spans);
  const end = Math.min(words.length, start + SNIPPET_WORDS);
  const opens = new Set(spans.map(([first]) => Math.max(first, start)));
  const closes = new Set(spans.map(([, last]) => Math.min(last, end - 1)));
  let snippet = start === 0 ? text.slice(0, words[0]!.start) : "…";
  for (let i = start; i < end; i++) {
    const word = words[i]!;
    const shown = text.slice(word.start, word.end);
    snippet += `${opens.has(i) ? "**" : ""}${shown}${closes.has(i) ? "**" : ""}`;
    if (i + 1 < end) snippet += text.slice(word.end, words[i + 1]!.start);
  }
  return end === words.length ? snippet + text.slice(words[end - 1]!.end) : `${snippet}…`;
}

/** Where the typed words match, as [first, last] word indexes, in order, overlapping ones joined. */
function matchedSpans(words: readonly Word[], query: readonly (readonly SearchTerm[])[]): [number, number][] {
  const found: [number, number][] = [];
  for (const runs of query) {
    for (let i = 0; i + runs.length <= words.length; i++) {
      if (runs.every((run, at) => matches(words[i + at]!.text, run))) found.push([i, i + runs.length - 1]);
    }
  }
  found.sort((a, b) => a[0] - b[0]);
  const joined: [number, number][] = [];
  for (const span of found) {
    const last = joined.at(-1);
    if (last && span[0] <= last[1]) last[1] = Math.max(last[1], span[1]);
    else joined.push(span);
  }
  return joined;
}

function matches(word: string, term: SearchTerm): boolean {
  return term.prefix ? word.startsWith(term.text) : word === term.text;
}

/**
 * The first word shown: of the windows of `SNIPPET_WORDS` words, the earliest holding the most
 * matched words, moved so that its hits stand in its middle.
 */
function windowStart(count: number, spans: readonly [number, number][]): number {
  const hit = new Array<boolean>(count).fill(false);
  for (const [first, last] of spans) for (let i = first; i <= last; i++) hit[i] = true;
  let best = 0;
  let bestCount = 0;
  let inWindow = 0;
  for (let i = 0; i < count; i++) {
    if (hit[i]) inWindow++;
    if (i >= SNIPPET_WORDS && hit[i - SNIPPET_WORDS]) inWindow--;
    if (inWindow > bestCount) {
      bestCount = inWindow;
      best = Math.max(0, i - SNIPPET_WORDS + 1);
    }
  }
  if (bestCount === 0) return 0;
  const limit = Math.min(count, best + SNIPPET_WORDS);
  let first = best;
  while (!hit[first]) first++;
  let last = limit - 1;
  while (!hit[last]) last--;
  const centred = first - Math.floor((SNIPPET_WORDS - (last - first + 1)) / 2);
  return Math.max(0, Math.min(centred, count - SNIPPET_WORDS));
}
