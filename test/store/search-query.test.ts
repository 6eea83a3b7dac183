import { describe, expect, it } from "vitest";
import { toFtsQuery } from "../../src/store/search-query.js";

describe("the FTS5 query of what a person typed", () => {
  it("sends a word typed again once, as indexed, so 32 copies rank as one", () => {
    expect(toFtsQuery(Array.from({ length: 32 }, () => "lorem").join(" "))).toBe('"lorem" "lorem"*');
    expect(toFtsQuery("Café cafe CAFE zebra")).toBe('"Café" "zebra"*');
    expect(toFtsQuery('say "hi" say')).toBe('"say" """hi""" "say"*');
  });
});
