import { describe, expect, it } from "vitest";
import { SEARCH_CHUNK_UNITS, searchChunks } from "../../../src/store/postgres/pg-search-chunks.js";

describe("searchChunks", () => {
  it("keeps a text of at most the limit whole, even an empty one", () => {
    expect(searchChunks("")).toEqual([""]);
    const full = "a".repeat(SEARCH_CHUNK_UNITS);
    expect(searchChunks(full)).toEqual([full]);
  });

  it("ends a piece after the last white space in its second half, and loses no character", () => {
    const text = "abcd efgh ijkl mnop";
    expect(searchChunks(text, 10, 0)).toEqual(["abcd efgh ", "ijkl mnop"]);
    expect(searchChunks("ab\ncdefghij", 10, 0)).toEqual(["ab\ncdefghi", "j"]);
    const long = Array.from({ length: 5_000 }, (_, i) => `w${i}`).join(" ");
    const pieces = searchChunks(long, 1_000, 0);
    expect(pieces.join("")).toBe(long);
    for (const piece of pieces) expect(piece.length).toBeLessThanOrEqual(1_000);
    for (const piece of pieces.slice(0, -1)) expect(piece.endsWith(" ")).toBe(true);
  });

  it("starts each piece after the first at a word within the overlap, so words that close share a piece", () => {
    const words = Array.from({ length: 5_000 }, (_, i) => `w${i}`);
    const long = words.join(" ");
    const pieces = searchChunks(long, 1_000, 100);
    expect(pieces.length).toBeGreaterThan(long.length / 1_000);
    let at = 0;
    let end = 0;
    for (const [i, piece] of pieces.entries()) {
      expect(piece.length).toBeLessThanOrEqual(1_000);
      const offset = long.indexOf(piece, at);
      if (i > 0) {
        // begins at a word, inside the previous piece, no more than the overlap before its end
        expect(long[offset - 1]).toBe(" ");
        expect(offset).toBeGreaterThan(at);
        expect(offset).toBeGreaterThanOrEqual(end - 100);
        expect(offset).toBeLessThan(end);
      } else expect(offset).toBe(0);
      at = offset;
      end = offset + piece.length;
    }
    expect(end).toBe(long.length);
    // any run of words within 90 characters of each other stands whole in one piece
    for (let i = 0; i + 10 < words.length; i += 7) {
      const run = words.slice(i, i + 10).join(" ");
      if (run.length <= 90)
        expect(
          pieces.some((piece) => piece.includes(run)),
          run,
        ).toBe(true);
    }
  });

  it("cuts a text without white space at the limit, never between the halves of a surrogate pair", () => {
    expect(searchChunks("abcdefghijk", 4, 0)).toEqual(["abcd", "efgh", "ijk"]);
    expect(searchChunks("abcdefghijk", 4, 1)).toEqual(["abcd", "defg", "ghij", "jk"]);
    const pairs = "😀".repeat(5);
    // an overlap that would start inside a pair starts after it
    expect(searchChunks(`a${pairs}`, 4, 1)).toEqual(["a😀", "😀😀", "😀😀"]);
    const pieces = searchChunks(`a${pairs}`, 4, 0);
    expect(pieces).toEqual(["a😀", "😀😀", "😀😀"]);
    // a lone half would be stored as U+FFFD
    for (const piece of pieces) expect(Buffer.from(piece, "utf8").toString("utf8")).toBe(piece);
  });
});
