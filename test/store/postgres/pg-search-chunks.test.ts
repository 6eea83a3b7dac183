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
    expect(searchChunks(text, 10)).toEqual(["abcd efgh ", "ijkl mnop"]);
    expect(searchChunks("ab\ncdefghij", 10)).toEqual(["ab\ncdefghi", "j"]);
    const long = Array.from({ length: 5_000 }, (_, i) => `w${i}`).join(" ");
    const pieces = searchChunks(long, 1_000);
    expect(pieces.join("")).toBe(long);
    for (const piece of pieces) expect(piece.length).toBeLessThanOrEqual(1_000);
    for (const piece of pieces.slice(0, -1)) expect(piece.endsWith(" ")).toBe(true);
  });

  it("cuts a text without white space at the limit, never between the halves of a surrogate pair", () => {
    expect(searchChunks("abcdefghijk", 4)).toEqual(["abcd", "efgh", "ijk"]);
    const pairs = "😀".repeat(5);
    const pieces = searchChunks(`a${pairs}`, 4);
    expect(pieces).toEqual(["a😀", "😀😀", "😀😀"]);
    // a lone half would be stored as U+FFFD
    for (const piece of pieces) expect(Buffer.from(piece, "utf8").toString("utf8")).toBe(piece);
  });
});
