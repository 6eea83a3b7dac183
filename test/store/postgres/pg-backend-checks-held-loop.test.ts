import pg from "pg";
import { describe, expect, it } from "vitest";
import { BackendChecks } from "../../../src/store/postgres/pg-backend-checks.js";
import { openWatchedPool, queryWatch, watchBackend } from "../../../src/store/postgres/pg-backend-watch.js";
import { cleanupsAfterEach } from "../../support/cleanups.js";
import { pgUrl } from "../contract/backends.js";

/**
 * A process whose event loop is held (a long synchronous handler elsewhere) must not take its own
 * stall for a silent database: the checks of `BackendChecks` and `watchBackend` count the loop's
 * time, so a healthy connection is neither reported lost nor ended.
 */

const cleanups = cleanupsAfterEach();

/** Holds the event loop, as a long synchronous handler of another socket would. */
function holdLoop(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // busy: nothing else runs
  }
}

async function connected(): Promise<pg.Client & { processID: number }> {
  const client = new pg.Client({ connectionString: pgUrl! });
  client.on("error", () => undefined);
  await client.connect();
  cleanups.push(() => client.end().catch(() => undefined));
  return client as pg.Client & { processID: number };
}

describe.skipIf(!pgUrl)("checks of a backend while the event loop is held", () => {
  it("a question asked just before the loop is held past its bound gets the server's answer", async () => {
    const sleeper = await connected();
    const sleeping = sleeper.query("SELECT pg_sleep(4)");
    // bounds of a second and more: a loaded machine's connect and query fit in them
    const checks = new BackendChecks(pgUrl!, 1_000);
    const verdict = checks.ask(sleeper.processID);
    holdLoop(3_000);
    // the backend runs its statement: alive, however long the loop stood still
    expect(await verdict).toBe("alive");
    await sleeping;
  });

  it("a statement answered while the loop was held past the watch's period leaves its connection alive", async () => {
    const client = await connected();
    const unwatch = watchBackend(client, queryWatch(pgUrl!, 200));
    const answer = client.query("SELECT pg_sleep(0.05)");
    // the answer arrives during the hold; the backend is idle from then on
    holdLoop(700);
    await answer;
    unwatch();
    // a question asked about the idle backend would have ended it by now
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const { rows } = await client.query<{ one: number }>("SELECT 1 AS one");
    expect(rows[0]!.one).toBe(1);
  });
});

describe.skipIf(!pgUrl)("a watched pool's handshake while the event loop is held", () => {
  it("a new connection whose handshake the loop held past its bound is kept, and its statement answered", async () => {
    // a handshake bounded at 1 s (twice the watch's period)
    const pool = openWatchedPool(pgUrl!, { max: 1 }, queryWatch(pgUrl!, 500));
    pool.on("error", () => undefined);
    cleanups.push(() => pool.end().catch(() => undefined));
    const answer = pool.query<{ one: number }>("SELECT 1 AS one");
    // the connect is under way: its TCP handshake completes during the hold, its startup waits for the loop
    holdLoop(3_000);
    const { rows } = await answer;
    expect(rows[0]!.one).toBe(1);
  });
});
