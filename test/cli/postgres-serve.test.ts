import { readFileSync } from "node:fs";
import pg from "pg";
import { afterEach, describe, expect, inject, it } from "vitest";
import { createNodeClient } from "../../src/client/node.js";
import { PG_SCHEMA_VERSION } from "../../src/store/postgres/pg-schema.js";
import { PostgresSessionStore } from "../../src/store/postgres/postgres-store.js";
import { tempDir } from "../support/temp-dir.js";
import { testSchemas } from "./cli-schemas.js";
import { startServe } from "./run-cli.js";

const pgUrl = inject("pgUrl");
const schemas = testSchemas(pgUrl, "serve");
const stops: (() => Promise<unknown>)[] = [];
const dirs: { remove(): void }[] = [];

afterEach(async () => {
  for (const stop of stops.splice(0)) await stop();
  for (const dir of dirs.splice(0)) dir.remove();
  await schemas.drop();
});

const newSchema = (): string => schemas.create();

async function serve(args: string[], env: Record<string, string> = {}) {
  const started = await startServe(["--host", "127.0.0.1", "--port", "0", ...args], env);
  if (started.exited !== undefined) throw new Error(`serve exited ${started.exited}: ${started.stderr}`);
  stops.push(started.stop);
  const url = /listening on (\S+)/.exec(started.stdout)?.[1];
  if (!url) throw new Error(`no URL in ${started.stdout}`);
  return { ...started, url, hostId: /host id (\S+)/.exec(started.stdout)?.[1] };
}

async function metrics(url: string, token: string): Promise<string> {
  const res = await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${token}` } });
  return res.text();
}

describe.skipIf(!pgUrl)("sessionmux serve on PostgreSQL", { timeout: 180_000 }, () => {
  it("applies a missing schema, names its host in the banner, the log and /metrics", async () => {
    const schema = newSchema();
    const host = await serve(["--db", pgUrl!, "--db-schema", schema, "--host-id", "edge-1", "--token", "t1"]);
    expect(host.hostId).toBe("edge-1");
    expect(await metrics(host.url, "t1")).toContain('sessionmux_host_info{host_id="edge-1"} 1');
    const client = new pg.Client({ connectionString: pgUrl! });
    await client.connect();
    const { rows } = await client.query<{ v: number }>(
      `SELECT max(version)::int AS v FROM "${schema}".schema_migrations`,
    );
    await client.end();
    expect(rows[0]?.v).toBe(PG_SCHEMA_VERSION);
    const stderr = await host.stop();
    stops.pop();
    const ready = stderr.split("\n").find((line) => line.includes('"msg":"host ready"'));
    expect(ready).toBeDefined();
    expect(JSON.parse(ready!)).toMatchObject({
      hostId: "edge-1",
      db: expect.stringContaining(`schema ${schema}`),
    });
  });

  it("reads SESSIONMUX_DB and SESSIONMUX_DB_SCHEMA; without --host-id each host gets its own id", async () => {
    const schema = newSchema();
    const env = { SESSIONMUX_DB: pgUrl!, SESSIONMUX_DB_SCHEMA: schema, SESSIONMUX_TOKEN: "t2" };
    const [one, two] = await Promise.all([serve([], env), serve([], env)]);
    expect(one.hostId).toMatch(/^[A-Za-z0-9][A-Za-z0-9._-]*-[0-9a-f]{8}$/);
    expect(two.hostId).toMatch(/^[A-Za-z0-9][A-Za-z0-9._-]*-[0-9a-f]{8}$/);
    expect(one.hostId).not.toBe(two.hostId);
    expect(await metrics(two.url, "t2")).toContain(`sessionmux_host_info{host_id="${two.hostId}"} 1`);
    // a session created on one host is listed by the other: one database
    const client = createNodeClient({ url: `${one.url.replace("http", "ws")}/api/remote.mux`, token: "t2" });
    stops.push(() => client.close());
    await client.create({ sessionId: "shared-1" });
    await expect
      .poll(async () => {
        const res = await fetch(`${two.url}/api/chat/sessions`, { headers: { authorization: "Bearer t2" } });
        return JSON.stringify(await res.json());
      })
      .toContain("shared-1");
  });

  it("keeps the admin token in --data-dir when given no token", async () => {
    const schema = newSchema();
    const dir = tempDir();
    dirs.push(dir);
    const host = await serve(["--db", pgUrl!, "--db-schema", schema, "--data-dir", dir.path]);
    const token = /#token=([A-Za-z0-9_-]+)/.exec(host.stdout)?.[1];
    expect(host.stdout).toContain(`token kept in ${dir.file("sessionmux.token")}`);
    expect(readFileSync(dir.file("sessionmux.token"), "utf8").trim()).toBe(token);
    expect(
      (await fetch(`${host.url}/metrics`, { headers: { authorization: `Bearer ${token}` } })).status,
    ).toBe(200);
  });

  it("forwards no more calls at once than --max-forwarded-calls; past it a call is refused overloaded", async () => {
    const schema = newSchema();
    const host = await serve([
      "--db",
      pgUrl!,
      "--db-schema",
      schema,
      "--token",
      "t3",
      "--max-forwarded-calls",
      "1",
    ]);
    // another host, which never answers, runs the session's agent: every call for it is forwarded
    const other = await PostgresSessionStore.open(pgUrl!, { schema, maxConnections: 1 });
    stops.push(() => other.close());
    await other.create({ sessionId: "elsewhere", owner: "admin", model: "m" });
    expect(await other.acquireLease("elsewhere", "host-gone", 3_600_000)).toMatchObject({
      status: "acquired",
    });
    const client = createNodeClient({ url: `${host.url.replace("http", "ws")}/api/remote.mux`, token: "t3" });
    stops.push(() => client.close());
    const waiting = client.call("session.cancel", { sessionId: "elsewhere" });
    waiting.catch(() => undefined);
    const admin = new pg.Client({ connectionString: pgUrl! });
    await admin.connect();
    stops.push(() => admin.end());
    await expect
      .poll(async () => {
        const { rows } = await admin.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM "${schema}".forwarded_calls`,
        );
        return rows[0]?.n;
      })
      .toBe(1);
    // the default (256) would forward it too, and it would wait as long
    await expect(client.call("session.cancel", { sessionId: "elsewhere" })).rejects.toMatchObject({
      code: "overloaded",
      data: { limit: "pending_calls", max: 1 },
    });
  });

  it("refuses an invalid host id and an unreachable database with their codes", async () => {
    const badId = await startServe(["--port", "0", "--db", pgUrl!, "--host-id", "no spaces"]);
    expect(badId.exited).toBe(2);
    expect(badId.stderr).toMatch(/error: host_id_invalid: --host-id "no spaces"/);
    const down = await startServe([
      "--port",
      "0",
      "--db",
      "postgres://u:pw@127.0.0.1:1/test",
      "--token",
      "t",
    ]);
    expect(down.exited).toBe(2);
    expect(down.stderr).toMatch(
      /error: db_unreachable: cannot open PostgreSQL database postgres:\/\/u:\*\*\*@127\.0\.0\.1:1\/test/,
    );
  });
});
