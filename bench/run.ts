/**
 * `npm run bench`: every scenario of the performance claims, each run side by side with its
 * baselines and peers in the same process run, written to bench/results/<date>.json and .md.
 */
import { fileURLToPath } from "node:url";
import { startRawWs } from "./baselines/raw-ws.js";
import { describeMachine } from "./harness/machine.js";
import { Progress } from "./harness/progress.js";
import { type BenchReport, renderMarkdown, writeReport } from "./harness/report.js";
import { measureSubject, newScenario, type ScenarioResult, SESSIONMUX } from "./harness/result.js";
import type { SubjectFactory } from "./harness/subject.js";
import { DurableStreamsPeer } from "./peers/durable-streams.js";
import { startSocketIo } from "./peers/socketio.js";
import { durableStreamsAppends, rawBatchedInsert, storeAppends, wireAppends } from "./scenarios/append.js";
import { measureFanout } from "./scenarios/fanout.js";
import { measureLatency } from "./scenarios/latency.js";
import { measureIdleMemory, measureStalledMemory } from "./scenarios/memory.js";
import { postgresSteps } from "./scenarios/pg-steps.js";
import {
  buildSessionmuxLog,
  durableStreamsReplay,
  rawPageRead,
  storeReplay,
  wireReplay,
} from "./scenarios/replay.js";
import { measureResume } from "./scenarios/resume.js";
import { startSessionmux } from "./scenarios/sessionmux-subject.js";

const RAW_WS = "raw ws";
const RAW_SQLITE = "raw better-sqlite3";
const SOCKET_IO = "Socket.IO 4";
const DURABLE_STREAMS = "Durable Streams";

const fanoutSubjects: [string, SubjectFactory][] = [
  [SESSIONMUX, startSessionmux],
  [RAW_WS, startRawWs],
  [SOCKET_IO, startSocketIo],
];

type Step = { label: string; run: () => Promise<void> };

/** `--only <id>` (e.g. `append-wire`): scenario ids to run, or undefined for all. */
function onlyScenarios(argv: readonly string[]): Set<string> | undefined {
  const ids = argv.flatMap((arg, i) => (arg === "--only" && argv[i + 1] ? argv[i + 1]!.split(",") : []));
  return ids.length > 0 ? new Set(ids) : undefined;
}

function plan(results: ScenarioResult[], only: Set<string> | undefined): Step[] {
  const steps: Step[] = [];
  const wanted = (id: string) => !only || only.has(id);
  const add = (
    result: ScenarioResult,
    subjects: [string, () => Promise<{ value: number; detail?: string }>][],
  ) => {
    if (!wanted(result.id)) return;
    results.push(result);
    for (const [subject, run] of subjects)
      steps.push({ label: `${result.title}: ${subject}`, run: () => measureSubject(result, subject, run) });
  };

  const appendShape = { writers: 100, appendsPerWriter: 100 };
  add(
    newScenario("append-store", "Append, 100 writers (store)", "events/s", true, [
      { against: RAW_SQLITE, min: 0.8 },
    ]),
    [
      [SESSIONMUX, () => storeAppends(appendShape)],
      [RAW_SQLITE, () => rawBatchedInsert(appendShape)],
    ],
  );
  const wireShape = { writers: 100, appendsPerWriter: 20 };
  add(
    newScenario("append-wire", "Append, 100 writers (over the network)", "events/s", true, [
      { against: DURABLE_STREAMS, min: 10 },
    ]),
    [
      [SESSIONMUX, () => wireAppends(wireShape)],
      [DURABLE_STREAMS, () => durableStreamsAppends(() => DurableStreamsPeer.start(), wireShape)],
    ],
  );

  const fanoutGoals = [
    { against: RAW_WS, min: 0.5 },
    { against: SOCKET_IO, min: 3 },
  ];
  const fanout = newScenario(
    "fanout-1x100",
    "Fanout 1 session → 100 followers",
    "deliveries per server CPU-s",
    true,
    fanoutGoals,
  );
  add(
    fanout,
    fanoutSubjects.map(([name, factory]) => [
      name,
      () => measureFanout(factory, { sessions: 1, connections: 100, eventsPerSession: 5_000, batch: 50 }),
    ]),
  );
  const many = newScenario(
    "fanout-100x10",
    "100 sessions × 10 followers",
    "deliveries per server CPU-s",
    true,
    fanoutGoals,
  );
  add(
    many,
    fanoutSubjects.map(([name, factory]) => [
      name,
      () => measureFanout(factory, { sessions: 100, connections: 10, eventsPerSession: 200, batch: 10 }),
    ]),
  );

  const replayEvents = 100_000;
  let log: Awaited<ReturnType<typeof buildSessionmuxLog>> | undefined;
  const builtLog = async () => (log ??= await buildSessionmuxLog(replayEvents));
  add(
    newScenario("replay-store", "Cold replay of a 100k-event session (store)", "events/s", true, [
      { against: RAW_SQLITE, min: 0.8 },
    ]),
    [
      [SESSIONMUX, async () => storeReplay(await builtLog())],
      [RAW_SQLITE, () => rawPageRead(replayEvents)],
    ],
  );
  add(
    newScenario("replay-wire", "Cold replay of a 100k-event session (over the network)", "events/s", true, [
      { against: DURABLE_STREAMS, min: 3 },
    ]),
    [
      [SESSIONMUX, async () => wireReplay(await builtLog())],
      [DURABLE_STREAMS, () => durableStreamsReplay(replayEvents)],
    ],
  );
  steps.push({ label: "cleanup", run: async () => log?.remove() });

  add(
    newScenario("resume", "Resume: 1,000 followers × 100 events behind", "ms until all caught up", false, [
      { against: SOCKET_IO, min: 3 },
    ]),
    fanoutSubjects.map(([name, factory]) => [
      name,
      () => measureResume(factory, { followers: 1_000, behind: 100 }),
    ]),
  );

  const p50 = newScenario("latency-p50", "Append→delivery latency p50", "ms", false);
  const p99 = newScenario("latency-p99", "Append→delivery latency p99", "ms", false);
  if (wanted(p50.id) || wanted(p99.id)) results.push(p50, p99);
  for (const [name, factory] of wanted(p50.id) || wanted(p99.id) ? fanoutSubjects : []) {
    steps.push({
      label: `latency: ${name}`,
      run: async () => {
        let measured: Awaited<ReturnType<typeof measureLatency>> | undefined;
        await measureSubject(p50, name, async () => {
          measured = await measureLatency(factory, { followers: 10, events: 1_000, gapMs: 2 });
          return { value: measured.p50, detail: `${measured.samples} samples, 10 followers` };
        });
        if (measured)
          p99.figures.push({ subject: name, value: measured.p99, detail: `${measured.samples} samples` });
      },
    });
  }

  for (const step of postgresSteps(results, wanted)) steps.push(step);

  add(
    newScenario("memory-idle", "Memory per idle connection", "bytes", false),
    fanoutSubjects.map(([name, factory]) => [name, () => measureIdleMemory(factory, 500)]),
  );
  add(
    newScenario("memory-stalled", "Memory per stalled follower", "bytes", false),
    fanoutSubjects.map(([name, factory]) => [name, () => measureStalledMemory(factory, 5, 100_000)]),
  );
  return steps;
}

async function main(): Promise<void> {
  const started = Date.now();
  const results: ScenarioResult[] = [];
  const only = onlyScenarios(process.argv.slice(2));
  const steps = plan(results, only);
  const progress = new Progress(steps.length);
  for (const step of steps) {
    progress.next(step.label);
    await step.run();
  }
  progress.done();
  const report: BenchReport = {
    date: new Date().toISOString().slice(0, 10),
    machine: describeMachine(),
    durationMs: Date.now() - started,
    scenarios: results,
  };
  if (only) {
    // A partial run must not overwrite the day's full results.
    process.stdout.write(renderMarkdown(report));
    return;
  }
  const written = writeReport(report, fileURLToPath(new URL("./results/", import.meta.url)));
  process.stdout.write(written.markdown);
  process.stdout.write(`\nwritten: ${written.json}, ${written.md}\n`);
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
