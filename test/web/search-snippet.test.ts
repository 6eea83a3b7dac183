import type { TemplateResult } from "lit-html";
import { describe, expect, it } from "vitest";
import { markedSnippet } from "../../web/src/session-list-view.js";

/** Each part of a marked snippet: plain text as a string, a marked word as `[word]`. */
const shape = (snippet: string) =>
  markedSnippet(snippet).map((part) =>
    typeof part === "string" ? part : `[${String((part as TemplateResult).values[0])}]`,
  );

describe("a search hit's snippet", () => {
  it("marks each word the host put between ** and **", () => {
    expect(shape("…about the **zebra** and the **zebras**…")).toEqual([
      "…about the ",
      "[zebra]",
      " and the ",
      "[zebras]",
      "…",
    ]);
    expect(shape("no match markers")).toEqual(["no match markers"]);
  });

  it("shows a ** without its pair as written", () => {
    expect(shape("a **b** c **d")).toEqual(["a ", "[b]", " c ", "**d"]);
    expect(shape("**")).toEqual(["", "**"]);
  });
});
