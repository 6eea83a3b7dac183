import { loadavg } from "node:os";
import { newScenario, type ScenarioResult, SESSIONMUX } from "../harness/result.js";
import { DEFAULT_PG_URL, median, pgAppendRounds } from "./pg-append.js";
import { pgFanoutRounds } from "./pg-fanout.js";

const RAW_PG = "raw pg batched insert";
const SAME_HOST = "same host (PostgreSQL)";
const ROUNDS = 5;

const list = (values: readonly number[]) =>
  values.map((v) => Math.round(v).toLocaleString("en-US")).join(", ");

/**
 * The PostgreSQL scenarios of `npm run bench` (database at SESSIONMUX_TEST_PG_URL, default the
 * local test one): append with 100 writers against a raw batched insert, and cross-host against
 * same-host fanout. Each alternates its two subjects over 5 rounds and reports the medians, with
 * every round's figure and the machine's load in the notes.
 */
export function postgresSteps(
  results: ScenarioResult[],
  wanted: (id: string) => boolean,
): { label: string; run: () => Promise<void> }[] {
  const url = DEFAULT_PG_URL;
  const steps: { label: string; run: () => Promise<void> }[] = [];
  const append = newScenario("append-pg", "Append, 100 writers (PostgreSQL store)", "events/s", true, [
    { against: RAW_PG, min: 0.8 },
  ]);
  if (wanted(append.id)) {
    results.push(append);
    steps.push({
      label: `${append.title}: ${ROUNDS} alternating rounds`,
      run: async () => {
        const load = loadavg()[0]!;
        try {
          const shape = { writers: 100, appendsPerWriter: 50 };
          const rounds = await pgAppendRounds(url, shape, ROUNDS);
          append.figures.push(
            {
              subject: SESSIONMUX,
              value: median(rounds.store),
              detail: `${rounds.transactions} transactions`,
            },
            { subject: RAW_PG, value: median(rounds.raw), detail: "one unnest INSERT per round of 100 rows" },
          );
          append.notes.push(
            `${shape.writers} writers × ${shape.appendsPerWriter} acknowledged appends, synchronous_commit=on; ` +
              `rounds (store): ${list(rounds.store)}; rounds (raw): ${list(rounds.raw)}; load ${load.toFixed(2)}`,
          );
        } catch (error) {
          append.errors.push(
            `PostgreSQL at ${url}: ${error instanceof Error ? error.message : String(error)}`,
          );
        }
      },
    });
  }
  const fanout = newScenario(
    "fanout-pg-cross-host",
    "Fanout on PostgreSQL: writer on host A, 50 followers on host B",
    "deliveries per server CPU-s",
    true,
    [{ against: SAME_HOST, min: 0.8 }],
  );
  if (wanted(fanout.id)) {
    results.push(fanout);
    steps.push({
      label: `${fanout.title}: ${ROUNDS} alternating rounds`,
      run: async () => {
        const load = loadavg()[0]!;
        try {
          const shape = { sessions: 1, connections: 50, eventsPerSession: 2_000, batch: 20 };
          const rounds = await pgFanoutRounds(url, shape, ROUNDS);
          fanout.figures.push(
            { subject: SESSIONMUX, value: median(rounds.crossHost), detail: rounds.detail },
            {
              subject: SAME_HOST,
              value: median(rounds.sameHost),
              detail: "followers on the writer's host A",
            },
          );
          fanout.notes.push(
            `server CPU counts both hosts (one process); rounds (cross): ${list(rounds.crossHost)}; ` +
              `rounds (same): ${list(rounds.sameHost)}; wall deliveries/s median cross ${list([median(rounds.crossWall)])} ` +
              `vs same ${list([median(rounds.sameWall)])}; load ${load.toFixed(2)}`,
          );
        } catch (error) {
          fanout.errors.push(
            `PostgreSQL at ${url}: ${error instanceof Error ? error.message : String(error)}`,
          );
        }
      },
    });
  }
  return steps;
}
