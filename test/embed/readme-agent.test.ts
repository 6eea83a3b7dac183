import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";

describe("README", () => {
  it("shows the custom agent the embedding test runs, as a user imports it", () => {
    const readme = readFileSync(new URL("../../README.md", import.meta.url), "utf8");
    const tested = readFileSync(new URL("./shout-agent.ts", import.meta.url), "utf8").replace(
      'from "../../src/index.js";',
      'from "sessionmux";',
    );
    expect(readme).toContain(`\`\`\`ts\n${tested}\`\`\``);
  });
});
