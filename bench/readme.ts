/**
 * `npm run bench:readme -- bench/results/<run>.json [--write]`: the README's performance table
 * from one full run, printed, or written into README.md between its table markers.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { relative } from "node:path";
import { fileURLToPath } from "node:url";
import { renderReadmeTable, replaceReadmeTable } from "./harness/readme-table.js";
import type { BenchReport } from "./harness/report.js";

const args = process.argv.slice(2);
const file = args.find((arg) => !arg.startsWith("--"));
if (!file) {
  console.error("usage: npm run bench:readme -- bench/results/<run>.json [--write]");
  process.exit(2);
}
const report = JSON.parse(readFileSync(file, "utf8")) as BenchReport;
if (report.method?.quick) {
  console.error(`${file} is a --quick run: its figures are not for the README`);
  process.exit(2);
}
const root = fileURLToPath(new URL("..", import.meta.url));
const table = renderReadmeTable(report, relative(root, file).replace(/\.json$/, ".md"));
if (args.includes("--write")) {
  const readmePath = `${root}README.md`;
  writeFileSync(readmePath, replaceReadmeTable(readFileSync(readmePath, "utf8"), table));
  process.stdout.write(`README.md: table from ${file}\n`);
} else process.stdout.write(`${table}\n`);
