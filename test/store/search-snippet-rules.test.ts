import { describe, expect, it } from "vitest";
import type { SearchTerm } from "../../src/store/postgres/pg-search-terms.js";
import { searchSnippet } from "../../src/store/search-snippet.js";

/** A typed word: whole (`exact`), or any word it starts (`prefix`). */
const exact = (text: string): SearchTerm => ({ text, prefix: false });
const prefix = (text: string): SearchTerm => ({ text, prefix: true });
const snip = (text: string, ...phrases: SearchTerm[][]) => searchSnippet(text, phrases);
/** `w0 w1 … w<n-1>` */
const numbered = (n: number) => Array.from({ length: n }, (_, i) => `w${i}`).join(" ");

describe("a search snippet's rules (the same on both stores)", () => {
  it("matches a whole typed word only whole, a prefix one at the start of a word", () => {
    expect(snip("chunks chunk", [exact("chunk")])).toBe("chunks **chunk**");
    expect(snip("chunks chunk", [prefix("chun")])).toBe("**chunks** **chunk**");
    expect(snip("unchunked chunky", [prefix("chunk")])).toBe("unchunked **chunky**");
  });

  it("marks a phrase only where all its words stand in a row, the whole run once; a phrase longer than the text is no match", () => {
    expect(snip("gamma alpha beta delta", [exact("alpha"), exact("beta")])).toBe(
      "gamma **alpha beta** delta",
    );
    expect(snip("alpha gamma beta", [exact("alpha"), exact("beta")])).toBe("alpha gamma beta");
    expect(snip("gamma alpha betamax", [exact("alpha"), exact("beta")])).toBe("gamma alpha betamax");
    expect(snip("gamma alpha betamax", [exact("alpha"), prefix("beta")])).toBe("gamma **alpha betamax**");
    expect(snip("beta gamma alpha", [exact("alpha"), exact("beta")])).toBe("beta gamma alpha");
    // phrases that overlap are marked as one run; runs apart stay apart
    expect(
      snip(
        "one two three four five alpha beta gamma",
        [exact("one")],
        [exact("four")],
        [exact("alpha"), exact("beta")],
        [exact("beta"), exact("gamma")],
      ),
    ).toBe("**one** two three **four** five **alpha beta gamma**");
  });

  it("takes an empty phrase as no phrase, in a short text and a long one", () => {
    expect(snip("alpha beta", [], [exact("beta")])).toBe("alpha **beta**");
    const long = `${"filler ".repeat(2000)}target ${"tail ".repeat(100)}`;
    expect(snip(long, [], [exact("target")])).toBe(
      "…filler filler filler filler filler **target** tail tail tail tail tail tail…",
    );
  });

  it("shows a text without a word as it is, or `…` when only a piece of it was read", () => {
    expect(snip("!!! ???", [exact("x")])).toBe("!!! ???");
    expect(snip("!".repeat(9000), [exact("x")])).toBe("…");
    expect(snip("hello world", [exact("zebra")])).toBe("hello world");
  });

  it("shows the earliest window holding the most hits, with its hits in the middle", () => {
    const words = numbered(30).split(" ");
    words[2] = "target";
    // a hit near the start: the window starts at the text's start
    expect(snip(words.join(" "), [exact("target")])).toBe("w0 w1 **target** w3 w4 w5 w6 w7 w8 w9 w10 w11…");
    words[0] = "target";
    words[1] = "target";
    words[29] = "target";
    expect(snip(words.join(" "), [exact("target")])).toBe(
      "**target** **target** **target** w3 w4 w5 w6 w7 w8 w9 w10 w11…",
    );
    // hits at the 10th and 11th words: each marked (a word's index of two digits sorts after one of one as text)
    const tens = numbered(20).split(" ");
    tens[9] = "target";
    tens[10] = "target";
    expect(snip(tens.join(" "), [exact("target")])).toBe(
      "…w4 w5 w6 w7 w8 **target** **target** w11 w12 w13 w14 w15…",
    );
  });

  it("closes a run longer than the window at the window's last word", () => {
    const text = numbered(20);
    const phrase = text.split(" ").slice(0, 14).map(exact);
    expect(snip(text, phrase)).toBe("**w0 w1 w2 w3 w4 w5 w6 w7 w8 w9 w10 w11**…");
  });

  describe("a text longer than 8 Ki characters is read from the piece around its first typed word", () => {
    it("the first in the text, whichever the query names first, found in its lower case", () => {
      const text = `${"chunk ".repeat(3000)}Zebra ${"chunk ".repeat(3000)}Quokka ${"chunk ".repeat(3000)}`;
      const around = (word: string) =>
        `…chunk chunk chunk chunk chunk **${word}** chunk chunk chunk chunk chunk chunk…`;
      expect(snip(text, [exact("quokka")], [exact("zebra")])).toBe(around("Zebra"));
      expect(snip(text, [exact("zebra")], [exact("quokka")])).toBe(around("Zebra"));
      // a word the text does not hold changes nothing, wherever it stands in the query
      expect(snip(text, [exact("quokka")], [exact("zebra")], [exact("absent")])).toBe(around("Zebra"));
      expect(snip(text, [exact("absent")], [exact("quokka")])).toBe(around("Quokka"));
      // at the very start: read from the start, whichever the query names first
      expect(snip(`Quokka ${text}`, [exact("quokka")], [exact("zebra")])).toBe(
        "**Quokka** chunk chunk chunk chunk chunk chunk chunk chunk chunk chunk chunk…",
      );
      expect(snip(`Quokka ${text}`, [exact("zebra")], [exact("quokka")])).toBe(
        "**Quokka** chunk chunk chunk chunk chunk chunk chunk chunk chunk chunk chunk…",
      );
    });

    it("a first word between 4 Ki and 8 Ki characters in, and one in the last 4 Ki of a text", () => {
      const early = `${"a ".repeat(2100)}target ${"b ".repeat(1050)}`;
      expect(early.length).toBeLessThan(8192);
      expect(snip(early, [exact("target")])).toBe("…a a a a a **target** b b b b b b…");
      const middle = `${"a ".repeat(5000)}target ${"b ".repeat(5000)}`;
      expect(snip(middle, [exact("target")])).toBe("…a a a a a **target** b b b b b b…");
      // the piece is the text's last 8 Ki characters: it starts inside the run of x, which is cut
      const late = `${"x".repeat(10_000)} ${"y".repeat(5000)} hit`;
      expect(snip(late, [exact("hit")])).toBe(`…${"y".repeat(5000)} **hit**`);
    });

    it("a word the piece cut into is not shown, and `…` stands where it was", () => {
      expect(snip(`${"x".repeat(20_000)} hit tail`, [exact("hit")])).toBe("…**hit** tail");
      expect(snip(`head hit ${"y".repeat(20_000)}`, [exact("hit")])).toBe("head **hit**…");
    });
  });
});
