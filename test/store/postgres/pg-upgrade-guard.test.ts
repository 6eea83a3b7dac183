import { randomBytes } from "node:crypto";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { LEGACY_LISTENER } from "../../../src/store/postgres/pg-host-presence.js";
import {
  type MigrationPlan,
  migrate,
  PG_SCHEMA_VERSION,
  THIS_BUILD,
} from "../../../src/store/postgres/pg-schema.js";
import { EarlierBuildsLiveError } from "../../../src/store/postgres/pg-upgrade-guard.js";
import { PostgresSessionStore } from "../../../src/store/postgres/postgres-store.js";
import { cleanupsAfterEach } from "../../support/cleanups.js";
import { dropSchema, pgUrl } from "../contract/backends.js";
import { delta } from "../open-store.js";
import { presenceHolders, versionOf } from "./upgrade-state.js";

/**
 * Rolling upgrades on PostgreSQL: `migrate` applies an entry that needs earlier builds stopped only
 * while no host is on the schema (`refuseBesideHosts`), and a host of this build that finds such
 * an entry past its build writes nothing more (`PgSchemaFence`). A later build is played by this
 * build's entries and one more.
 */

const cleanups = cleanupsAfterEach();
const LATER = PG_SCHEMA_VERSION + 1;

/** A later build: this build's entries and one that, with `stops`, needs earlier builds stopped. */
function laterBuild(stops: boolean): MigrationPlan {
  return {
    steps: [...THIS_BUILD.steps, "COMMENT ON TABLE sessions IS 'a later build'"],
    stopsEarlierBuilds: new Set([...THIS_BUILD.stopsEarlierBuilds, ...(stops ? [LATER] : [])]),
  };
}

function newSchema(): string {
  const schema = `upgrade_${randomBytes(6).toString("hex")}`;
  cleanups.push(() => dropSchema(pgUrl!, schema));
  return schema;
}

async function connect(config: pg.ClientConfig = {}): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: pgUrl!, ...config });
  // a connection the server ends (as a test ends a host's) is no failure of the test
  client.on("error", () => undefined);
  await client.connect();
  cleanups.push(() => client.end().catch(() => undefined));
  return client;
}

async function openHost(schema: string, hostId: string): Promise<PostgresSessionStore> {
  const store = await PostgresSessionStore.open(pgUrl!, { schema, maxConnections: 2, hostId });
  cleanups.push(() => store.close());
  return store;
}

/** Runs `plan`'s migration of `schema` on a connection of its own (`on`: that one). */
async function migrateAs(plan: MigrationPlan, schema: string, on?: pg.Client): Promise<void> {
  const client = on ?? (await connect());
  await migrate(client, schema, plan);
}

/** The presence lock a host of a build since that lock holds (one of before this check too). */
async function earlierBuildHost(schema: string): Promise<pg.Client> {
  const host = await connect({ application_name: "sessionmux" });
  await host.query("SELECT pg_advisory_lock_shared(21325, hashtext($1))", [`sessionmux_${schema}`]);
  return host;
}

describe.skipIf(!pgUrl)("migrations beside hosts of earlier builds", { timeout: 60_000 }, () => {
  it("refuses an entry that needs earlier builds stopped while a host is on the schema, naming it, and applies it once the host closed", async () => {
    const schema = newSchema();
    const admin = await connect();
    const host = await openHost(schema, "host-a");
    await host.create({ sessionId: "s", owner: "o", model: "m" });
    const [writer] = await presenceHolders(admin, schema);
    const refused = await migrateAs(laterBuild(true), schema).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(EarlierBuildsLiveError);
    expect(refused).toMatchObject({
      code: "db_earlier_builds_live",
      schema,
      version: LATER,
      hosts: [expect.objectContaining({ pid: writer, name: "sessionmux" })],
    });
    expect((refused as Error).message).toContain(`backend ${writer} (sessionmux`);
    // nothing applied, and the host goes on writing
    expect(await versionOf(admin, schema)).toBe(PG_SCHEMA_VERSION);
    expect(await host.append("s", [delta("t1", "x")])).toMatchObject({ status: "appended" });
    await host.close();
    await migrateAs(laterBuild(true), schema);
    expect(await versionOf(admin, schema)).toBe(LATER);
  });

  it("counts a host of a build before this check by its presence lock, until its connection ended", async () => {
    const schema = newSchema();
    const admin = await connect();
    await openHost(schema, "host-a").then((store) => store.close());
    const earlier = await earlierBuildHost(schema);
    const pid = (await presenceHolders(admin, schema))[0];
    await expect(migrateAs(laterBuild(true), schema)).rejects.toMatchObject({
      code: "db_earlier_builds_live",
      hosts: [expect.objectContaining({ pid })],
    });
    // the server ends the connection of a host that is gone (its keepalive, or an operator)
    await admin.query("SELECT pg_terminate_backend($1, 10000)", [pid]);
    await earlier.end().catch(() => undefined);
    await migrateAs(laterBuild(true), schema);
    expect(await versionOf(admin, schema)).toBe(LATER);
  });

  it("counts a listener of a build before the presence lock, until it left", async () => {
    const schema = newSchema();
    const admin = await connect();
    await openHost(schema, "host-a").then((store) => store.close());
    const legacy = await connect({ application_name: LEGACY_LISTENER });
    await legacy.query(`LISTEN "sessionmux_${schema}"`);
    await expect(migrateAs(laterBuild(true), schema)).rejects.toMatchObject({
      code: "db_earlier_builds_live",
      hosts: [expect.objectContaining({ name: LEGACY_LISTENER })],
    });
    await legacy.end();
    await migrateAs(laterBuild(true), schema);
    expect(await versionOf(admin, schema)).toBe(LATER);
  });

  it("applies an entry that needs no stop beside a live host, which goes on writing", async () => {
    const schema = newSchema();
    const admin = await connect();
    const host = await openHost(schema, "host-a");
    await host.create({ sessionId: "s", owner: "o", model: "m" });
    await migrateAs(laterBuild(false), schema);
    expect(await versionOf(admin, schema)).toBe(LATER);
    expect(await host.append("s", [delta("t1", "x")])).toMatchObject({ status: "appended" });
    expect(host.buildOutdated()).toBeUndefined();
  });

  it("a host that lost its connection while a later build's entry that stops it was applied writes nothing more, with the typed error", async () => {
    const schema = newSchema();
    const channel = `sessionmux_${schema}`;
    const admin = await connect();
    const host = await openHost(schema, "host-a");
    await host.create({ sessionId: "s", owner: "o", model: "m" });
    const lease = await host.acquireLease("s", "host-a", 10_000);
    if (lease.status !== "acquired") throw new Error(lease.status);
    const [writer] = await presenceHolders(admin, schema);
    // the later build's migrate, on a connection that takes the presence key in exclusive mode as
    // soon as the host's group-commit connection ended: the host's next presence lock waits
    // behind it, so the entry is applied while the host holds none (as over a partition)
    const later = await connect();
    const exclusive = later.query("SELECT pg_advisory_lock(21325, hashtext($1))", [channel]);
    await admin.query("SELECT pg_terminate_backend($1, 10000)", [writer]);
    await exclusive;
    await migrateAs(laterBuild(true), schema, later);
    expect(await versionOf(admin, schema)).toBe(LATER);
    await later.query("SELECT pg_advisory_unlock(21325, hashtext($1))", [channel]);
    const outdated = {
      code: "host_shutting_down",
      retryable: true,
      data: { schemaVersion: LATER, buildSchemaVersion: PG_SCHEMA_VERSION },
    };
    await expect(host.append("s", [delta("t1", "x")])).rejects.toMatchObject(outdated);
    await expect(host.create({ sessionId: "t", owner: "o", model: "m" })).rejects.toMatchObject(outdated);
    await expect(host.renewLeases("host-a", [lease.lease], 10_000)).rejects.toMatchObject(outdated);
    expect(host.buildOutdated()).toMatchObject(outdated);
    // nothing of them was written
    const { rows } = await admin.query(
      `SELECT session_id, seq::int FROM "${schema}".events ORDER BY session_id, seq`,
    );
    expect(rows).toEqual([{ session_id: "s", seq: 1 }]);
  });
});
