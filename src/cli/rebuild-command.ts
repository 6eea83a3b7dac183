import { resolve } from "node:path";
import type { Command } from "commander";
import { SqliteSessionStore } from "../store/sqlite-store.js";

export function registerRebuildCommand(program: Command): void {
  program
    .command("rebuild-projections")
    .description("rebuild the session list cache from the event log (the host must be stopped)")
    .option("--db <file>", "SQLite database file", "./data/sessions.db")
    .action(async (options: { db: string }) => {
      const store = SqliteSessionStore.open(resolve(options.db));
      try {
        await store.rebuildProjections();
        process.stdout.write("projections rebuilt\n");
      } finally {
        await store.close();
      }
    });
}
