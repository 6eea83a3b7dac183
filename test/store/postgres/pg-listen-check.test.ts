import { once } from "node:events";
import type pg from "pg";
import { describe, expect, it } from "vitest";
import { openClient } from "../../../src/store/postgres/pg-pool.js";
import { cleanupsAfterEach } from "../../support/cleanups.js";
import { pgUrl } from "../contract/backends.js";

const cleanups = cleanupsAfterEach();

/** Holds the event loop, as a long synchronous handler of another socket would. */
function holdLoop(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // busy: nothing else runs
  }
}

describe.skipIf(!pgUrl)("the LISTEN connection check", () => {
  it("keeps a connection whose answer came while the event loop was held past the check's bound", async () => {
    const client = openClient(pgUrl!, "sessionmux-check-test", { listenCheckMs: 200 });
    let ended = false;
    client.on("error", () => undefined);
    client.on("end", () => {
      ended = true;
    });
    cleanups.push(() => (ended ? undefined : client.end()));
    await client.connect();
    await client.query('LISTEN "sessionmux_check_test"');
    // the second check: its answer arrives while the loop is held, and its bound passes meanwhile
    const query = client.query.bind(client) as (text: string) => Promise<pg.QueryResult>;
    let checks = 0;
    const held = new Promise<void>((resolve) => {
      (client as unknown as { query: (text: string) => Promise<pg.QueryResult> }).query = (text) => {
        const answer = query(text);
        if (text === "SELECT 1" && ++checks === 2) {
          holdLoop(400);
          resolve();
        }
        return answer;
      };
    });
    await held;
    // two more checks answered after the held one: the connection was kept and is still asked
    await expect.poll(() => checks, { timeout: 10_000 }).toBeGreaterThanOrEqual(4);
    expect(ended).toBe(false);
    const heard = once(client, "notification");
    await query(`NOTIFY "sessionmux_check_test", 'still here'`);
    expect((await heard)[0]).toMatchObject({ payload: "still here" });
  });
});
