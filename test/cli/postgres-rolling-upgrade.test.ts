import pg from "pg";
import { afterEach, describe, expect, inject, it } from "vitest";
import { createNodeClient } from "../../src/client/node.js";
import {
  type MigrationPlan,
  migrate,
  PG_SCHEMA_VERSION,
  THIS_BUILD,
} from "../../src/store/postgres/pg-schema.js";
import { presenceHolders, versionOf } from "../store/postgres/upgrade-state.js";
import { UNDO_PG_LOG_KEYS } from "../support/purge-migration.js";
import { testSchemas } from "./cli-schemas.js";
import { runCli, startServe } from "./run-cli.js";

/**
 * Rolling upgrades of hosts on one PostgreSQL schema, with real `sessionmux` processes: `migrate`
 * (and a `serve` that migrates) refuses an entry that needs earlier builds stopped while a host of
 * one is on the schema, and a `serve` host whose schema gained such an entry past its build stops
 * writing and answers not ready.
 */

const pgUrl = inject("pgUrl");
const schemas = testSchemas(pgUrl, "rolling");
const cleanups: (() => Promise<unknown>)[] = [];

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
  await schemas.drop();
});

async function connect(config: pg.ClientConfig = {}): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: pgUrl!, ...config });
  // a connection the server ends (as a test ends a host's) is no failure of the test
  client.on("error", () => undefined);
  await client.connect();
  cleanups.push(() => client.end());
  return client;
}

describe.skipIf(!pgUrl)("rolling upgrades on PostgreSQL", { timeout: 120_000 }, () => {
  it("migrate and serve exit 2 naming a live host of an earlier build, and migrate once it stopped", async () => {
    const schema = schemas.create();
    const db = ["--db", pgUrl!, "--db-schema", schema];
    expect((await runCli(["migrate", ...db])).code).toBe(0);
    const admin = await connect();
    // the schema as a build before entry 16 (a clear or a delete leaves the log to a purge) left it
    await admin.query(
      `SET search_path = "${schema}"; ${UNDO_PG_LOG_KEYS} DELETE FROM schema_migrations WHERE version >= 16`,
    );
    // a host of that build on it: its group-commit connection holds the presence lock
    const earlier = await connect({ application_name: "sessionmux" });
    await earlier.query("SELECT pg_advisory_lock_shared(21325, hashtext($1))", [`sessionmux_${schema}`]);
    const [pid] = await presenceHolders(admin, schema);
    const refused = await runCli(["migrate", ...db]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/^error: db_earlier_builds_live: /);
    expect(refused.stderr).toContain(`migrated to version 16`);
    expect(refused.stderr).toContain(`backend ${pid} (sessionmux`);
    const serve = await startServe(["--host", "127.0.0.1", "--port", "0", ...db, "--token", "t1"]);
    if (serve.exited === undefined) cleanups.push(serve.stop);
    expect(serve.exited).toBe(2);
    expect(serve.stderr).toContain("db_earlier_builds_live");
    expect(await versionOf(admin, schema)).toBe(15);
    // the host stopped: its connection, and with it the lock, is gone
    await earlier.end();
    const migrated = await runCli(["migrate", ...db]);
    expect(migrated.code).toBe(0);
    expect(JSON.parse(migrated.stdout)).toMatchObject({ from: 15, to: PG_SCHEMA_VERSION });
  });

  it("a serve host whose connection was lost while a later build's entry stopping it was applied answers 503 build_outdated and refuses writes", async () => {
    const schema = schemas.create();
    const host = await startServe([
      "--host",
      "127.0.0.1",
      "--port",
      "0",
      "--db",
      pgUrl!,
      "--db-schema",
      schema,
      "--token",
      "t1",
      "--host-id",
      "edge-1",
    ]);
    if (host.exited !== undefined) throw new Error(`serve exited ${host.exited}: ${host.stderr}`);
    cleanups.push(host.stop);
    const url = /listening on (\S+)/.exec(host.stdout)![1]!;
    const readyz = async () => {
      const res = await fetch(`${url}/readyz`);
      return { status: res.status, code: ((await res.json()) as { code?: string }).code };
    };
    await expect.poll(readyz, { timeout: 30_000, interval: 200 }).toEqual({ status: 200, code: undefined });
    const admin = await connect();
    const [writer] = await presenceHolders(admin, schema);
    // paused (a frozen VM, a partition) while the server ends its group-commit connection, the
    // lock with it, so the later build's migrate finds no host on the schema
    process.kill(host.pid, "SIGSTOP");
    cleanups.push(async () => process.kill(host.pid, "SIGCONT"));
    await admin.query("SELECT pg_terminate_backend($1, 10000)", [writer]);
    const later: MigrationPlan = {
      steps: [...THIS_BUILD.steps, "COMMENT ON TABLE sessions IS 'a later build'"],
      stopsEarlierBuilds: new Set([...THIS_BUILD.stopsEarlierBuilds, PG_SCHEMA_VERSION + 1]),
    };
    await migrate(await connect(), schema, later);
    process.kill(host.pid, "SIGCONT");
    await expect
      .poll(readyz, { timeout: 30_000, interval: 200 })
      .toEqual({ status: 503, code: "build_outdated" });
    const client = createNodeClient({ url: `${url.replace("http", "ws")}/api/remote.mux`, token: "t1" });
    cleanups.push(() => client.close());
    await expect(client.call("session.create", { sessionId: "after" })).rejects.toMatchObject({
      code: "host_shutting_down",
      retryable: true,
    });
    const { rows } = await admin.query(`SELECT session_id FROM "${schema}".sessions`);
    expect(rows).toEqual([]);
  });
});
