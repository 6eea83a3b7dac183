import pg from "pg";
import { describe, expect, inject, it } from "vitest";
import { pgReadyCheck } from "../../src/operations/pg-ready-check.js";
import { scratchDatabase } from "../store/postgres/scratch-database.js";
import { cleanupsAfterEach } from "../support/cleanups.js";

/**
 * `/readyz` on PostgreSQL: a connection of its own, named `sessionmux-ready`, asking the server
 * whether it is in recovery (a standby that takes no writes).
 */

const pgUrl = inject("pgUrl") ?? "";
const cleanups = cleanupsAfterEach();

describe.skipIf(!pgUrl)("pgReadyCheck", () => {
  it("passes on a server that takes writes, over one connection named sessionmux-ready", async () => {
    const scratch = await scratchDatabase(pgUrl, "ready_check");
    cleanups.push(() => scratch.drop());
    const ready = pgReadyCheck(scratch.url);
    cleanups.push(() => ready.close());
    await Promise.all([ready.check(), ready.check(), ready.check()]);
    expect(ready.poolStats()).toEqual({ total: 1, idle: 1, waiting: 0 });
    const { rows } = await scratch.server.query<{ name: string }>(
      "SELECT application_name AS name FROM pg_stat_activity WHERE datname = $1",
      [scratch.name],
    );
    expect(rows).toEqual([{ name: "sessionmux-ready" }]);
  });

  it("fails, naming the reason, on a server that answers it is in recovery", async () => {
    const scratch = await scratchDatabase(pgUrl, "ready_check");
    cleanups.push(() => scratch.drop());
    // A standby's answer: pg_is_in_recovery() true, from a function found before pg_catalog's.
    const setup = new pg.Client({ connectionString: scratch.url });
    await setup.connect();
    try {
      await setup.query(
        "CREATE SCHEMA standby; CREATE FUNCTION standby.pg_is_in_recovery() RETURNS boolean LANGUAGE sql AS 'SELECT true'",
      );
    } finally {
      await setup.end();
    }
    const url = new URL(scratch.url);
    url.searchParams.set("options", "-c search_path=standby,pg_catalog");
    const standby = pgReadyCheck(url.toString());
    cleanups.push(() => standby.close());
    await expect(standby.check()).rejects.toThrow(/^the PostgreSQL server is a read-only standby$/);
    // the same database as the server sees it: ready
    const primary = pgReadyCheck(scratch.url);
    cleanups.push(() => primary.close());
    await primary.check();
  });
});
