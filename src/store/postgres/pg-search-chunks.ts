import { cutUtf16 } from "../../../protocol/utf16-cut.js";

/**
 * The most UTF-16 units of text one search row holds. PostgreSQL refuses a `tsvector` over
 * 1 MiB, which about 1.3 MB of distinct words reach (hashes, encoded data): one such answer then
 * failed its turn's end. A unit of text makes at most about 9 bytes of `tsvector` (a one-letter
 * word and its space, a Hangul syllable decomposed into three letters), so this many stay below it.
 */
export const SEARCH_CHUNK_UNITS = 65_536;

/**
 * How much of a piece's end the next piece repeats. A query's words are found together only
 * within one piece, so words this close in a message are always in one piece together: any
 * phrase a query can hold (512 characters at most), and words near each other across a cut.
 */
export const SEARCH_CHUNK_OVERLAP = 4_096;

/**
 * `text` in pieces of at most `max` units, each ending at white space where there is some in its
 * second half (so a word is seldom cut in two), never between the halves of a surrogate pair.
 * Each piece after the first starts `overlap` units before the previous one ended, at the start of
 * a word where there is white space to find one.
 */
export function searchChunks(
  text: string,
  max = SEARCH_CHUNK_UNITS,
  overlap = SEARCH_CHUNK_OVERLAP,
): string[] {
  const chunks: string[] = [];
  let start = 0;
  while (text.length - start > max) {
    let piece = cutUtf16(text.slice(start), max);
    const space = piece.search(/\s\S*$/u);
    if (space >= max / 2) piece = piece.slice(0, space + 1);
    chunks.push(piece);
    start = nextStart(text, start, start + piece.length, overlap);
  }
  chunks.push(text.slice(start));
  return chunks;
}

/**
 * Where the piece after the one from `start` to `end` begins: `overlap` units before `end`, moved
 * on to the next word's start within the overlap, and always past `start` so the pieces advance.
 */
function nextStart(text: string, start: number, end: number, overlap: number): number {
  let next = Math.max(start + 1, end - overlap);
  const word = text.slice(next, end).search(/\s\S/u);
  if (word >= 0) next += word + 1;
  // a surrogate pair's second half never begins a piece
  const code = text.charCodeAt(next);
  if (code >= 0xdc00 && code <= 0xdfff && next < end) next++;
  return next;
}
