import { describe, expect, it } from "vitest";
import { cutUtf16 } from "../../protocol/utf16-cut.js";

const EMOJI = "\u{1F600}"; // U+D83D U+DE00

describe("cutUtf16", () => {
  it("keeps a text within the bound as it is, the bound itself included", () => {
    expect(cutUtf16("", 0)).toBe("");
    expect(cutUtf16("abc", 3)).toBe("abc");
    expect(cutUtf16(`a${EMOJI}`, 3)).toBe(`a${EMOJI}`);
  });

  it("cuts to the bound where the last unit kept is a whole character", () => {
    expect(cutUtf16("abcdef", 4)).toBe("abcd");
    // the pair ends exactly at the bound: kept whole
    expect(cutUtf16(`ab${EMOJI}cd`, 4)).toBe(`ab${EMOJI}`);
  });

  it("leaves out a pair the bound would halve, one unit short of the bound", () => {
    expect(cutUtf16(`abc${EMOJI}`, 4)).toBe("abc");
    expect(cutUtf16(`${EMOJI}${EMOJI}`, 3)).toBe(EMOJI);
    expect(cutUtf16(EMOJI, 1)).toBe("");
  });

  it("keeps what the text already holds: a lone second half at the cut stays", () => {
    expect(cutUtf16("ab\uDE00cd", 3)).toBe("ab\uDE00");
  });
});
