import { describe, expect, it } from "vitest";
import { indexedForm } from "../../src/store/indexed-word.js";
import { searchTerms } from "../../src/store/postgres/pg-search-terms.js";
import { searchSnippet, snippetOf } from "../../src/store/search-snippet.js";
import { openTempStore } from "./open-store.js";

/** `snippetOf` with the words it reads counted. */
function counted(text: string, query: string): { snippet: string; words: number } {
  let words = 0;
  const snippet = snippetOf(text, searchTerms(query), (word) => {
    words++;
    return indexedForm(word);
  });
  return { snippet, words };
}

// an answer of 100,000 deltas: 1.2 MB holding its one word 100,000 times
const answer = Array.from({ length: 100_000 }, (_, i) => `chunk ${i}`).join(" ");

describe("a hit's snippet costs what 8 Ki characters of its text do (docs/reliability.md, Limits)", () => {
  it("reads only the piece around the first typed word of a long text, however many times the text holds it", () => {
    const first = counted(answer, "chunk");
    expect(first.snippet).toBe("**chunk** 0 **chunk** 1 **chunk** 2 **chunk** 3 **chunk** 4 **chunk** 5…");
    // 8,192 characters hold under 2,048 words of this text: not its 200,000
    expect(first.words).toBeLessThanOrEqual(2048);

    // the words of the query, 32 of them, each matched at every place, read the same words
    const many = counted(answer, Array.from({ length: 32 }, () => "chunk").join(" "));
    expect(many.snippet).toBe(first.snippet);
    expect(many.words).toBe(first.words);

    // a word first found deep in the text is shown there, cut on both sides
    const deep = counted(answer, "77777");
    expect(deep.snippet).toBe(
      "…chunk 77775 chunk 77776 chunk **77777** chunk 77778 chunk 77779 chunk 77780…",
    );
    expect(deep.words).toBeLessThanOrEqual(2048);
  });

  it("shows a short text as before: the window holding the most hits, every shown hit marked once", () => {
    const text =
      "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma";
    expect(searchSnippet(text, searchTerms("alpha"))).toBe(
      "**alpha** beta gamma delta epsilon zeta eta theta iota kappa lambda mu…",
    );
    // a hit outside the window chosen is not marked inside it
    expect(searchSnippet(text, searchTerms("alpha rho sigma"))).toBe(
      "…eta theta iota kappa lambda mu nu xi omicron pi **rho** **sigma**",
    );
  });

  it("is what a SQLite search shows, on the store's read thread and on its own connection", async () => {
    const opened = openTempStore();
    try {
      const { store } = opened;
      await store.create({ sessionId: "s", owner: "o", model: "m" });
      expect(
        (
          await store.append("s", [
            { type: "turn/start", data: { turnId: "t", trigger: "prompt" } },
            // two deltas: one event holds at most 1 MiB
            { type: "assistant/delta", data: { turnId: "t", text: answer.slice(0, 600_000) } },
            { type: "assistant/delta", data: { turnId: "t", text: answer.slice(600_000) } },
            { type: "turn/end", data: { turnId: "t", state: "completed" } },
          ])
        ).status,
      ).toBe("appended");
      const expected = searchSnippet(answer, searchTerms("77777"));
      expect((await store.search("77777", 10)).map((hit) => hit.snippet)).toEqual([expected]);
      expect((await store.search("77777", 10, "o")).map((hit) => hit.snippet)).toEqual([expected]);
    } finally {
      await opened.dispose();
    }
  });
});
