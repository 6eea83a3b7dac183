import { dirname, resolve } from "node:path";
import type { Command } from "commander";
import { existingDatabase } from "../operations/database-path.js";
import { assertNotInUse } from "../operations/exclusive-access.js";
import { backupDatabase } from "../operations/sqlite-backup.js";
import { StartupError } from "../operations/startup-error.js";
import { rotateToken, tokenFilePath } from "../operations/token-file.js";
import { SqliteSessionStore } from "../store/sqlite-store.js";
import { dbOption } from "./cli-options.js";

/** Commands on the database and data folder: backup, rebuild-projections, token rotate. */
export function registerOperationsCommands(program: Command): void {
  program
    .command("backup <file>")
    .description(
      "copy the database to <file> while the host runs (SQLite backup API: consistent, online), then check the copy",
    )
    .addOption(dbOption())
    .action(async (file: string, options: { db: string }) => {
      const report = await backupDatabase(options.db, resolve(file));
      process.stdout.write(`${JSON.stringify(report)}\n`);
      if (report.integrity !== "ok") process.exitCode = 1;
    });

  program
    .command("rebuild-projections")
    .description(
      "rebuild the session list cache from the event log (refused while a host has the database open)",
    )
    .addOption(dbOption())
    .action(async (options: { db: string }) => {
      const file = assertNotInUse(options.db);
      const store = SqliteSessionStore.open(file);
      try {
        await store.rebuildProjections();
        process.stdout.write("projections rebuilt\n");
      } finally {
        await store.close();
      }
    });

  const token = program.command("token").description("the admin token kept beside the database");
  token
    .command("rotate")
    .description(
      "replace the kept token and print the new one; a running host uses it after its next restart",
    )
    .addOption(dbOption())
    .action((options: { db: string }) => {
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
