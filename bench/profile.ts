/**
 * `npm run bench:profile -- [fanout|fanout-1x100|append-store|append-wire|append-wire-raw|append-pg|resume] [rounds] [--plain]`: one scenario's
 * sessionmux side alone (default: the many-sessions fanout, 100 sessions × 10 followers, 10 runs)
 * on one subject, under V8's sampling profiler, summarised as the top self-time functions (`TOP`
 * of them; `PROFILE_KEEP=<name>` names the profile file). Samples are wall time of the main
 * thread: a commit waiting on fsync shows as the transaction's own time. `--plain` prints each
 * run's figure with the process's user and system CPU instead; `GC_EACH=1` collects garbage
 * before each run, as the rounds of `npm run bench` do.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { collectGarbage } from "./harness/gc.js";

interface CpuProfile {
  nodes: { id: number; callFrame: { functionName: string; url: string; lineNumber: number } }[];
  samples: number[];
  timeDeltas: number[];
}

/** Self time per function (ms), largest first. */
function selfTimes(profile: CpuProfile): { name: string; ms: number; share: number }[] {
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

const scenario = process.argv[2] ?? "fanout";
const rounds = Number(process.argv[3] ?? 10);

if (process.argv[4] === "--child") {
  const { startSessionmux } = await import("./scenarios/sessionmux-subject.js");
  const open = async () => {
    if (scenario === "append-store") {
      const { openStoreAppends } = await import("./scenarios/append.js");
      return openStoreAppends({ writers: 100, appendsPerWriter: 100 });
    }
    if (scenario === "append-wire-raw") {
      const { openRawWsAppends } = await import("./scenarios/append.js");
      return openRawWsAppends({ writers: 100, appendsPerWriter: 20 });
    }
    if (scenario === "append-wire") {
      const { openWireAppends } = await import("./scenarios/append.js");
      return openWireAppends({ writers: 100, appendsPerWriter: 20 });
    }
    if (scenario === "append-pg") {
      const { DEFAULT_PG_URL, openPgStoreAppends } = await import("./scenarios/pg-append.js");
      const appender = await openPgStoreAppends(DEFAULT_PG_URL, { writers: 100, appendsPerWriter: 300 });
      return {
        async measure() {
          const { rate, transactions } = await appender.run();
          return { value: rate, detail: `${transactions} transactions` };
        },
        close: () => appender.close(),
      };
    }
    if (scenario === "resume") {
      const { openResume } = await import("./scenarios/resume.js");
      return openResume(startSessionmux, { followers: 1_000, behind: 100 });
    }
    const { openFanout } = await import("./scenarios/fanout.js");
    if (scenario === "fanout-1x100")
      return openFanout(startSessionmux, {
        sessions: 1,
        connections: 100,
        eventsPerSession: 10_000,
        batch: 50,
      });
    return openFanout(startSessionmux, { sessions: 100, connections: 10, eventsPerSession: 200, batch: 10 });
  };
  const subject = await open();
  for (let i = 0; i < rounds; i++) {
    if (process.env.GC_EACH) collectGarbage();
    const cpu = process.cpuUsage();
    const m = await subject.measure();
    const used = process.cpuUsage(cpu);
    process.stdout.write(
      `${m.value.toFixed(0)} user ${(used.user / 1000).toFixed(0)} ms sys ${(used.system / 1000).toFixed(0)} ms; ${m.detail}\n`,
    );
  }
  await subject.close();
  process.exit(0);
} else {
  if (process.argv[4] === "--plain") {
    const run = spawnSync(
      process.execPath,
      ["--import", "tsx", fileURLToPath(import.meta.url), scenario, String(rounds), "--child"],
      { stdio: ["ignore", "inherit", "inherit"], timeout: 600_000 },
    );
    process.exit(run.status ?? 1);
  }
  const dir = mkdtempSync(join(tmpdir(), "sessionmux-profile-"));
  try {
    const self = fileURLToPath(import.meta.url);
    const run = spawnSync(
      process.execPath,
      [
        ...(process.env.PROFILE_KEEP ? [`--cpu-prof-name=${process.env.PROFILE_KEEP}`] : []),
        "--cpu-prof",
        `--cpu-prof-dir=${dir}`,
        "--import",
        "tsx",
        self,
        scenario,
        String(rounds),
        "--child",
      ],
      { stdio: ["ignore", "inherit", "inherit"], timeout: 600_000 },
    );
    if (run.status !== 0) throw new Error(`profiled run failed (${run.status ?? run.signal})`);
    const files = readdirSync(dir).map((f) => join(dir, f));
    const main = files.map((f) => readFileSync(f, "utf8")).sort((a, b) => b.length - a.length)[0];
    if (!main) throw new Error("no profile written");
    process.stdout.write("self time (ms)  share  function\n");
    for (const row of selfTimes(JSON.parse(main)).slice(0, Number(process.env.TOP ?? 30)))
      process.stdout.write(
        `${row.ms.toFixed(0).padStart(12)}  ${(row.share * 100).toFixed(1).padStart(5)}%  ${row.name}\n`,
      );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
