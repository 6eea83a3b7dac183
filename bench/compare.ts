/**
 * `npm run bench:compare -- a.json b.json [c.json]`: how far two or three full runs of
 * `npm run bench` (their bench/results/*.json) are apart on every ratio, as a markdown table.
 * Exits 1 when a ratio moved by more than ±10% (`--tolerance 0.05` for another bound).
 */
import { readFileSync } from "node:fs";
import { basename } from "node:path";
import { ratioAgreement, renderAgreement } from "./harness/agreement.js";
import type { BenchReport } from "./harness/report.js";

const files: string[] = [];
let tolerance = 0.1;
const args = process.argv.slice(2);
for (let i = 0; i < args.length; i++) {
  if (args[i] === "--tolerance") tolerance = Number(args[++i]);
  else files.push(args[i]!);
}
if (files.length < 2 || files.length > 3 || !(tolerance > 0)) {
  console.error("usage: npm run bench:compare -- <run1.json> <run2.json> [run3.json] [--tolerance 0.1]");
  process.exit(2);
}
const runs = files.map((file) => JSON.parse(readFileSync(file, "utf8")) as BenchReport);
const rows = ratioAgreement(runs);
const loads = runs.map(
  (run, i) =>
    `${basename(files[i]!)}: load ${run.load?.before.toFixed(2) ?? "?"} → ${run.load?.after.toFixed(2) ?? "?"}, ${((run.durationMs ?? 0) / 1000).toFixed(0)} s`,
);
process.stdout.write(`${loads.map((l) => `- ${l}`).join("\n")}\n\n`);
process.stdout.write(
  renderAgreement(
    runs.map((_, i) => `run ${i + 1}`),
    rows,
    tolerance,
  ),
);
process.exit(rows.every((row) => row.maxDeviation <= tolerance) ? 0 : 1);
