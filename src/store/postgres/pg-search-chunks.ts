import { cutUtf16 } from "../../../protocol/utf16-cut.js";

/**
 * The most UTF-16 units of text one search row holds. PostgreSQL refuses a `tsvector` over
 * 1 MiB, which about 1.3 MB of distinct words reach (hashes, encoded data): one such answer then
 * failed its turn's end. A unit of text makes at most about 9 bytes of `tsvector` (a one-letter
 * word and its space, a Hangul syllable decomposed into three letters), so this many stay below it.
 */
export const SEARCH_CHUNK_UNITS = 65_536;

/**
 * `text` in pieces of at most `SEARCH_CHUNK_UNITS`, each ending at white space where there is
 * some in its second half (so a word is seldom cut in two), never between the halves of a
 * surrogate pair. Words of one query are found together only within one piece.
 */
export function searchChunks(text: string, max = SEARCH_CHUNK_UNITS): string[] {
  const chunks: string[] = [];
  let rest = text;
  while (rest.length > max) {
    let piece = cutUtf16(rest, max);
    const space = piece.search(/\s\S*$/u);
    if (space >= max / 2) piece = piece.slice(0, space + 1);
    chunks.push(piece);
    rest = rest.slice(piece.length);
  }
  chunks.push(rest);
  return chunks;
}
