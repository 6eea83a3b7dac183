import { dirname, resolve } from "node:path";
import type { Command } from "commander";
import { existingDatabase } from "../operations/database-path.js";
import { databaseTarget, redactUrl } from "../operations/database-target.js";
import { keptTokenFile } from "../operations/kept-token-location.js";
import { backupDatabase } from "../operations/sqlite-backup.js";
import { restoreDatabase } from "../operations/sqlite-restore.js";
import { openSqliteStoreAlone } from "../operations/sqlite-store-alone.js";
import { earlierBuildsLive, StartupError } from "../operations/startup-error.js";
import { rotateToken, tokenFilePath } from "../operations/token-file.js";
import { MissingSchemaError } from "../store/postgres/pg-schema.js";
import { EarlierBuildsLiveError } from "../store/postgres/pg-upgrade-guard.js";
import { PostgresSessionStore } from "../store/postgres/postgres-store.js";
import { dataDirOption, dbOption, dbSchemaOption } from "./cli-options.js";

interface DbOptions {
  db: string;
  dbSchema?: string;
}

/** The store in a schema `migrate` (or `serve`) created: a mistyped schema name creates nothing. */
async function openExistingPostgres(url: string, schema: string): Promise<PostgresSessionStore> {
  try {
    return await PostgresSessionStore.open(url, { schema, maxConnections: 2, createSchema: false });
  } catch (err) {
    if (err instanceof EarlierBuildsLiveError) throw earlierBuildsLive(err);
    if (!(err instanceof MissingSchemaError)) throw err;
    throw new StartupError(
      "db_schema_missing",
      `no sessionmux tables in schema "${schema}" of ${redactUrl(url)}; check --db-schema ` +
        "(or SESSIONMUX_DB_SCHEMA), or create them with sessionmux migrate",
    );
  }
}

/** Commands on the database and data folder: backup, restore, rebuild-projections, token rotate. */
export function registerOperationsCommands(program: Command): void {
  program
    .command("backup <file>")
    .description(
      "copy the database to <file> while the host runs (SQLite backup API: consistent, online), then check the copy",
    )
    .addOption(dbOption())
    .action(async (file: string, options: { db: string }) => {
      const target = databaseTarget(options.db);
      if (target.kind === "postgres") {
        throw new StartupError(
          "sqlite_only",
          `backup copies a SQLite file; back up PostgreSQL with its own tools, e.g. ` +
            `pg_dump --schema=<schema> --format=custom --file=${file} '${redactUrl(target.url)}' ` +
            "(or continuous archiving for point-in-time recovery)",
        );
      }
      const report = await backupDatabase(options.db, resolve(file));
      process.stdout.write(`${JSON.stringify(report)}\n`);
    });

  program
    .command("restore <backup>")
    .description(
      "replace the database with a backup sessionmux backup wrote (refused while a host has it open); " +
        "the replaced file is kept beside it as <db>.replaced-<time>",
    )
    .addOption(dbOption())
    .option("--no-keep-replaced", "delete the replaced database instead of keeping it beside the new one")
    .action((file: string, options: { db: string; keepReplaced: boolean }) => {
      const target = databaseTarget(options.db);
      if (target.kind === "postgres") {
        throw new StartupError(
          "sqlite_only",
          "restore replaces a SQLite file; restore PostgreSQL with its own tools: with every host on " +
            `the schema stopped, psql '${redactUrl(target.url)}' -c 'DROP SCHEMA "<schema>" CASCADE', then ` +
            `pg_restore --dbname='${redactUrl(target.url)}' ${file} (a dump pg_dump --schema=<schema> ` +
            "--format=custom wrote) and sessionmux migrate; pg_restore --clean drops only what the dump " +
            'holds, so it fails on a schema a later migration added to (README, "Restore on PostgreSQL")',
        );
      }
      const report = restoreDatabase(file, options.db, { keepReplaced: options.keepReplaced });
      process.stdout.write(`${JSON.stringify(report)}\n`);
    });

  program
    .command("rebuild-projections")
    .description(
      "rebuild the session list cache from the event log (SQLite: refused while a host has the file open; " +
        "PostgreSQL: online, in one transaction that holds every session's head)",
    )
    .addOption(dbOption())
    .addOption(dbSchemaOption())
    .action(async (options: DbOptions) => {
      const target = databaseTarget(options.db, options.dbSchema);
      if (target.kind === "postgres") {
        const store = await openExistingPostgres(target.url, target.schema);
        try {
          await store.rebuildProjections();
          process.stdout.write("projections rebuilt\n");
        } finally {
          await store.close();
        }
        return;
      }
      const store = openSqliteStoreAlone(target.path);
      try {
        await store.rebuildProjections();
        process.stdout.write("projections rebuilt\n");
      } finally {
        await store.close();
      }
    });

  const token = program
    .command("token")
    .description("the admin token kept beside the database (PostgreSQL: in --data-dir)");
  token
    .command("rotate")
    .description(
      "replace the kept token and print the new one; a running host refuses the old one from its next request on (open sockets stay open until they reconnect)",
    )
    .addOption(dbOption())
    .addOption(dataDirOption())
    .action((options: { db: string; dataDir: string }) => {
      const target = databaseTarget(options.db);
      if (target.kind === "postgres") {
        const file = keptTokenFile(target, options.dataDir, { createFolder: false });
        process.stdout.write(`${rotateToken(file)}\n`);
        process.stderr.write(`token written to ${file}; the old one is refused from now on\n`);
        return;
      }
      const folder = dirname(resolve(options.db));
      const file = tokenFilePath(resolve(options.db));
      try {
        existingDatabase(options.db);
      } catch (err) {
        if (!(err instanceof StartupError)) throw err;
        throw new StartupError("db_missing", `${err.message} (the token is kept in ${folder})`);
      }
      process.stdout.write(`${rotateToken(file)}\n`);
      process.stderr.write(`token written to ${file}; the old one is refused from now on\n`);
    });
}
