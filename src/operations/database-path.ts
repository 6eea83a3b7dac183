import { existsSync, mkdirSync, statSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { StartupError } from "./startup-error.js";

/**
 * Resolves the database path and makes sure its folder exists. A missing folder is most often a
 * misspelled path, so it is created only when asked; otherwise the host would start on a new,
 * empty database and the real one would look lost.
 */
export function prepareDatabasePath(path: string, options: { createFolder?: boolean } = {}): string {
  if (path === ":memory:") return path;
  const file = resolve(path);
  const folder = dirname(file);
  if (existsSync(folder)) {
    if (!statSync(folder).isDirectory()) {
      throw new StartupError("db_folder_missing", `database folder ${folder} is not a directory`);
    }
    refuseFolderAsFile(file);
    return file;
  }
  if (!options.createFolder) {
    throw new StartupError(
      "db_folder_missing",
      `database folder ${folder} does not exist (database ${file}); create it, fix the path, ` +
        "or pass --create-db-folder (createDbFolder: true) to create it",
    );
  }
  mkdirSync(folder, { recursive: true });
  return file;
}

/** For commands that work on an existing database: never create one on a misspelled path. */
export function existingDatabase(path: string): string {
  const file = resolve(path);
  if (!existsSync(file)) {
    throw new StartupError(
      "db_missing",
      `no database at ${file}; check --db (or SESSIONMUX_DB), or start 'sessionmux serve' once to create a new one`,
    );
  }
  refuseFolderAsFile(file);
  return file;
}

/** `--db` naming a folder (the data folder, say, not the file in it): SQLite says only that it cannot open it. */
function refuseFolderAsFile(file: string): void {
  if (existsSync(file) && statSync(file).isDirectory()) {
    throw new StartupError(
      "db_option_invalid",
      `${file} is a folder, not a database file; name the file in it (for example ${file}/sessions.db)`,
    );
  }
}
