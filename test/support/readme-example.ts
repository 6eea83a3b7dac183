import { readFileSync } from "node:fs";
import { transform } from "esbuild";

const README = new URL("../../README.md", import.meta.url);

/**
 * The first TypeScript example under `heading` in the README, each of `replacements` made (each
 * must occur: an example that no longer says what a test replaces fails the test), as JavaScript.
 */
export async function readmeExample(
  heading: string,
  replacements: readonly (readonly [string, string])[] = [],
  format?: "esm",
): Promise<string> {
  const readme = readFileSync(README, "utf8");
  const start = readme.indexOf(`\n${heading}\n`);
  if (start < 0) throw new Error(`the README has no heading ${heading}`);
  let written = /```ts\n([\s\S]*?)```/.exec(readme.slice(start))?.[1];
  if (written === undefined) throw new Error(`no TypeScript example under ${heading}`);
  for (const [from, to] of replacements) {
    if (!written.includes(from)) throw new Error(`the example under ${heading} no longer holds ${from}`);
    written = written.replace(from, to);
  }
  return (await transform(written, { loader: "ts", ...(format ? { format } : {}) })).code;
}
