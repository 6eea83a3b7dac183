import { existsSync, readFileSync } from "node:fs";
import pg from "pg";
import { afterEach, describe, expect, inject, it } from "vitest";
import { PG_SCHEMA_VERSION } from "../../src/store/postgres/pg-schema.js";
import { PostgresSessionStore } from "../../src/store/postgres/postgres-store.js";
import { tempDir } from "../support/temp-dir.js";
import { testSchemas } from "./cli-schemas.js";
import { runCli } from "./run-cli.js";

const pgUrl = inject("pgUrl");
/** Each test runs the CLI several times from the sources: slow on a loaded machine, still bounded. */
const CLI_TEST_TIMEOUT_MS = 180_000;
const schemas = testSchemas(pgUrl, "cli");
const dirs: { remove(): void }[] = [];

afterEach(async () => {
  for (const dir of dirs.splice(0)) dir.remove();
  await schemas.drop();
});

const newSchema = (): string => schemas.create();

async function appliedVersion(schema: string): Promise<number | null> {
  const client = new pg.Client({ connectionString: pgUrl! });
  await client.connect();
  try {
    const found = await client.query<{ t: string | null }>("SELECT to_regclass($1) AS t", [
      `"${schema}".schema_migrations`,
    ]);
    if (!found.rows[0]?.t) return null;
    const { rows } = await client.query<{ v: number }>(
      `SELECT max(version)::int AS v FROM "${schema}".schema_migrations`,
    );
    return rows[0]?.v ?? null;
  } finally {
    await client.end();
  }
}

describe.skipIf(!pgUrl)("sessionmux commands on a PostgreSQL URL", { timeout: CLI_TEST_TIMEOUT_MS }, () => {
  it("migrate creates the schema, applies every step once, and says so", async () => {
    const schema = newSchema();
    expect(await appliedVersion(schema)).toBeNull();
    const first = await runCli(["migrate", "--db", pgUrl!, "--db-schema", schema]);
    expect(first.stderr).toBe("");
    expect(first.code).toBe(0);
    expect(JSON.parse(first.stdout)).toMatchObject({ schema, from: 0, to: PG_SCHEMA_VERSION });
    expect(await appliedVersion(schema)).toBe(PG_SCHEMA_VERSION);
    // again, through the environment: nothing left to apply
    const again = await runCli(["migrate"], { SESSIONMUX_DB: pgUrl!, SESSIONMUX_DB_SCHEMA: schema });
    expect(again.code).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({ from: PG_SCHEMA_VERSION, to: PG_SCHEMA_VERSION });
  });

  it("backup refuses a PostgreSQL database and points to pg_dump", async () => {
    const dir = tempDir();
    dirs.push(dir);
    const target = dir.file("copy.db");
    const result = await runCli(["backup", target, "--db", pgUrl!]);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/^error: sqlite_only: backup copies a SQLite file/);
    expect(result.stderr).toContain("pg_dump");
    expect(existsSync(target)).toBe(false);
  });

  it("rebuild-projections rebuilds the list rows from the log in the named schema", async () => {
    const schema = newSchema();
    const store = await PostgresSessionStore.open(pgUrl!, { schema, maxConnections: 2 });
    try {
      await store.create({ sessionId: "s1", owner: "admin", model: "demo" });
      await store.append("s1", [{ type: "session/renamed", data: { title: "kept title" } }]);
      const client = new pg.Client({ connectionString: pgUrl! });
      await client.connect();
      await client.query(`UPDATE "${schema}".projections SET title = 'damaged', seq = 0`);
      await client.end();
      expect((await store.projection("s1"))?.title).toBe("damaged");
      const result = await runCli(["rebuild-projections", "--db", pgUrl!, "--db-schema", schema]);
      expect(result.stderr).toBe("");
      expect(result.stdout).toBe("projections rebuilt\n");
      const rebuilt = await store.projection("s1");
      expect(rebuilt?.title).toBe("kept title");
      expect(rebuilt?.seq).toBe(2);
    } finally {
      await store.close();
    }
  });

  it("rebuild-projections names a schema that does not exist and creates nothing", async () => {
    const schema = newSchema();
    const result = await runCli(["rebuild-projections", "--db", pgUrl!, "--db-schema", schema]);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(
      /^error: db_schema_missing: no sessionmux tables in schema "cli_[0-9a-f]+"/,
    );
    expect(result.stderr).toContain(`"${schema}"`);
    const client = new pg.Client({ connectionString: pgUrl! });
    await client.connect();
    try {
      const found = await client.query("SELECT 1 FROM pg_namespace WHERE nspname = $1", [schema]);
      expect(found.rowCount).toBe(0);
    } finally {
      await client.end();
    }
  });

  it("token rotate keeps the token in --data-dir, and refuses a missing one", async () => {
    const dir = tempDir();
    dirs.push(dir);
    const rotated = await runCli(["token", "rotate", "--db", pgUrl!, "--data-dir", dir.path]);
    expect(rotated.code).toBe(0);
    const token = rotated.stdout.trim();
    expect(token).toMatch(/^[A-Za-z0-9_-]{32}$/);
    expect(readFileSync(dir.file("sessionmux.token"), "utf8").trim()).toBe(token);
    const missing = await runCli(["token", "rotate", "--db", pgUrl!], {
      SESSIONMUX_DATA_DIR: dir.file("nowhere"),
    });
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/^error: db_folder_missing: data folder .*nowhere does not exist/);
  });

  it("refuses a bad schema name, a schema for a SQLite file and an unreachable server, each with its code", async () => {
    const badSchema = await runCli(["migrate", "--db", pgUrl!, "--db-schema", 'x"; DROP']);
    expect(badSchema.code).toBe(2);
    expect(badSchema.stderr).toMatch(/^error: db_option_invalid: --db-schema/);
    const dir = tempDir();
    dirs.push(dir);
    const sqliteSchema = await runCli(["migrate", "--db", dir.file("s.db"), "--db-schema", "other"]);
    expect(sqliteSchema.code).toBe(2);
    expect(sqliteSchema.stderr).toMatch(/^error: db_option_invalid: --db-schema applies to a postgres/);
    const noDatabase = await runCli(["migrate", "--db", "postgres://u:secret@127.0.0.1:5432"]);
    expect(noDatabase.stderr).toMatch(/^error: db_option_invalid: .*names no database/);
    expect(noDatabase.stderr).not.toContain("secret");
    const unreachable = await runCli(["migrate", "--db", "postgres://u:secret@127.0.0.1:1/test"]);
    expect(unreachable.code).toBe(2);
    expect(unreachable.stderr).toMatch(
      /^error: db_unreachable: cannot connect to postgres:\/\/u:\*\*\*@127\.0\.0\.1:1\/test/,
    );
    expect(unreachable.stderr).not.toContain("secret");
  });
});
