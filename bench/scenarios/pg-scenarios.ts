import { newScenario, type ScenarioResult, SESSIONMUX } from "../harness/result.js";
import type { Measurement, RoundSubject, ScenarioOptions } from "../harness/rounds.js";
import { openFanout } from "./fanout.js";
import { DEFAULT_PG_URL, openPgStoreAppends, openRawPgInserts } from "./pg-append.js";
import { startPgPair } from "./pg-fanout.js";

export const RAW_PG = "raw pg batched insert";
export const SAME_HOST_PG = "same host (PostgreSQL)";

type PgScenario = [ScenarioResult, ([string, () => Promise<Measurement>] | RoundSubject)[], ScenarioOptions];

/**
 * The PostgreSQL scenarios of `npm run bench` (database at SESSIONMUX_TEST_PG_URL, default the
 * local test one; each run in a schema of its own, dropped after): append with 100 writers
 * against a raw batched insert with the same driver, and fanout with the writer on host A and
 * the followers on host B against followers on A. Rounds rotate the subjects like every scenario.
 */
export function postgresScenarios(url = DEFAULT_PG_URL): PgScenario[] {
  const appendShape = { writers: 100, appendsPerWriter: 50 };
  const fanoutShape = { sessions: 1, connections: 50, eventsPerSession: 5_000, batch: 20 };
  const events = appendShape.writers * appendShape.appendsPerWriter;
  // A run's rate as a measurement repeated runs combine: the wall time it took, and its events.
  const wallTimed = (rate: number, detail: string): Measurement => ({
    value: rate,
    cpuMs: (events * 1000) / rate,
    count: events,
    detail,
  });
  return [
    [
      newScenario("append-pg", "Append, 100 writers (PostgreSQL store)", "events/s", true, [
        { against: RAW_PG, min: 0.8 },
      ]),
      [
        {
          name: SESSIONMUX,
          open: async () => {
            const store = await openPgStoreAppends(url, appendShape);
            return {
              async measure() {
                const measured = await store.run();
                return wallTimed(
                  measured.rate,
                  `${measured.transactions} transactions, synchronous_commit=on`,
                );
              },
              close: () => store.close(),
            };
          },
        },
        {
          name: RAW_PG,
          open: async () => {
            const raw = await openRawPgInserts(url, appendShape);
            return {
              measure: async () =>
                wallTimed(
                  await raw.run(),
                  "one unnest INSERT of 100 rows per transaction, synchronous_commit=on",
                ),
              close: () => raw.close(),
            };
          },
        },
      ],
      {},
    ],
    [
      newScenario(
        "fanout-pg-cross-host",
        "Fanout on PostgreSQL: writer on host A, 50 followers on host B",
        "deliveries per server CPU-s",
        true,
        [{ against: SAME_HOST_PG, min: 0.8 }],
      ),
      [
        { name: SESSIONMUX, open: () => openFanout(() => startPgPair(url, "B"), fanoutShape) },
        { name: SAME_HOST_PG, open: () => openFanout(() => startPgPair(url, "A"), fanoutShape) },
      ],
      { pinned: true },
    ],
  ];
}
