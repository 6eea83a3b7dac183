/**
 * `npm run bench:profile`: the many-sessions fanout (100 sessions × 10 followers) for sessionmux
 * alone, under V8's sampling profiler, summarised as the top self-time functions. Samples are wall
 * time of the main thread: a commit waiting on fsync shows as the transaction's own time.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
}
interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

/** Self time per function (ms), largest first. */
export function selfTimes(profile: CpuProfile): { name: string; ms: number; share: number }[] {
  const byNode = new Map(profile.nodes.map((n) => [n.id, n]));
  const byName = new Map<string, number>();
  let total = 0;
  profile.samples.forEach((id, i) => {
    const delta = profile.timeDeltas[i] ?? 0;
    const frame = byNode.get(id)?.callFrame;
    if (!frame) return;
    const file = frame.url.split("/").at(-1) ?? "";
    const name = `${frame.functionName || "(anonymous)"} ${file}${file ? `:${frame.lineNumber + 1}` : ""}`;
    byName.set(name, (byName.get(name) ?? 0) + delta);
    total += delta;
  });
  return [...byName.entries()]
    .map(([name, us]) => ({ name, ms: us / 1000, share: total > 0 ? us / total : 0 }))
    .sort((a, b) => b.ms - a.ms);
}

if (process.argv[2] === "--child") {
  const { openFanout } = await import("./scenarios/fanout.js");
  const { startSessionmux } = await import("./scenarios/sessionmux-subject.js");
  const fanout = await openFanout(startSessionmux, {
    sessions: 100,
    connections: 10,
    eventsPerSession: 1_000,
    batch: 10,
  });
  const m = await fanout.measure();
  await fanout.close();
  process.stdout.write(`${m.detail}\n`);
  process.exit(0);
} else {
  const dir = mkdtempSync(join(tmpdir(), "sessionmux-profile-"));
  try {
    const self = fileURLToPath(import.meta.url);
    const run = spawnSync(
      process.execPath,
      ["--cpu-prof", `--cpu-prof-dir=${dir}`, "--import", "tsx", self, "--child"],
      {
        stdio: ["ignore", "inherit", "inherit"],
        timeout: 600_000,
      },
    );
    if (run.status !== 0) throw new Error(`profiled run failed (${run.status ?? run.signal})`);
    // the largest profile is the main thread's (tsx's loader thread writes its own)
    const files = readdirSync(dir).map((f) => join(dir, f));
    const main = files.map((f) => readFileSync(f, "utf8")).sort((a, b) => b.length - a.length)[0];
    if (!main) throw new Error("no profile written");
    process.stdout.write("self time (ms)  share  function\n");
    for (const row of selfTimes(JSON.parse(main) as CpuProfile).slice(0, 25))
      process.stdout.write(
        `${row.ms.toFixed(0).padStart(12)}  ${(row.share * 100).toFixed(1).padStart(5)}%  ${row.name}\n`,
      );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
