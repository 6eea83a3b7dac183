import type { Command } from "commander";
import pg from "pg";
import { databaseTarget, redactUrl } from "../operations/database-target.js";
import { openSqliteStoreAlone } from "../operations/sqlite-store-alone.js";
import { earlierBuildsLive, StartupError } from "../operations/startup-error.js";
import { SCHEMA_VERSION } from "../store/migrations.js";
import { migrate, PG_SCHEMA_VERSION, schemaIdentifier } from "../store/postgres/pg-schema.js";
import { EarlierBuildsLiveError } from "../store/postgres/pg-upgrade-guard.js";
import { dbOption, dbSchemaOption } from "./cli-options.js";

interface MigrateOptions {
  db: string;
  dbSchema?: string;
}

/**
 * `sessionmux migrate`: brings the database's schema to this build's version (`serve` does the
 * same on start when it is behind). Safe with several at once: PostgreSQL applies each step in one
 * transaction under an advisory lock. Safe while hosts run: a step those hosts' builds could not
 * run beside is refused while any is on the schema (`db_earlier_builds_live`, naming them).
 */
export function registerMigrateCommand(program: Command): void {
  program
    .command("migrate")
    .description(
      "bring the database schema up to this build (SQLite: an existing file, which serve creates; PostgreSQL: creates or upgrades the tables in --db-schema)",
    )
    .addOption(dbOption())
    .addOption(dbSchemaOption())
    .action(async (options: MigrateOptions) => {
      const target = databaseTarget(options.db, options.dbSchema);
      if (target.kind === "sqlite") {
        // a file a running host has open is refused db_in_use, as rebuild-projections refuses it
        const store = openSqliteStoreAlone(target.path);
        const { from, to } = store.schemaMigration;
        await store.close();
        // the same report as PostgreSQL's below: what the file was at, and what it is at now
        process.stdout.write(`${JSON.stringify({ db: target.path, from, to, latest: SCHEMA_VERSION })}\n`);
        return;
      }
      const client = new pg.Client({ connectionString: target.url, connectionTimeoutMillis: 10_000 });
      try {
        await client.connect();
      } catch (err) {
        throw new StartupError(
          "db_unreachable",
          `cannot connect to ${redactUrl(target.url)}: ${(err as Error).message}`,
          { cause: err },
        );
      }
      try {
        const before = await schemaVersion(client, target.schema);
        await migrate(client, target.schema).catch((err: unknown) => {
          // exits 2, naming the hosts to stop (see `EarlierBuildsLiveError`)
          throw err instanceof EarlierBuildsLiveError ? earlierBuildsLive(err) : err;
        });
        const after = await schemaVersion(client, target.schema);
        process.stdout.write(
          `${JSON.stringify({ db: redactUrl(target.url), schema: target.schema, from: before, to: after, latest: PG_SCHEMA_VERSION })}\n`,
        );
      } finally {
        await client.end().catch(() => undefined);
      }
    });
}

/** The highest applied migration of `schema`, 0 when it has none (or does not exist). */
async function schemaVersion(client: pg.Client, schema: string): Promise<number> {
  const table = `${schemaIdentifier(schema)}.schema_migrations`;
  const exists = await client.query<{ found: string | null }>("SELECT to_regclass($1) AS found", [table]);
  if (!exists.rows[0]?.found) return 0;
  const { rows } = await client.query<{ version: number | null }>(
    `SELECT max(version) AS version FROM ${table}`,
  );
  return Number(rows[0]?.version ?? 0);
}
