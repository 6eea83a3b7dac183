import { existsSync, mkdirSync, statSync } from "node:fs";
import { join, resolve } from "node:path";
import type { DatabaseTarget } from "./database-target.js";
import { StartupError } from "./startup-error.js";
import { tokenFilePath } from "./token-file.js";

/**
 * Where the admin token a host mints when given none is kept: beside a SQLite file, and in the
 * data folder (`--data-dir`) for PostgreSQL, which has no folder of its own. Several hosts on one
 * database each keep their own: give them one `--token` or `--tokens-file` instead.
 */
export function keptTokenFile(
  target: DatabaseTarget,
  dataDir: string,
  options: { createFolder: boolean },
): string {
  if (target.kind === "sqlite") return tokenFilePath(resolve(target.path));
  const folder = resolve(dataDir);
  if (!existsSync(folder)) {
    if (!options.createFolder) {
      throw new StartupError(
        "db_folder_missing",
        `data folder ${folder} does not exist (it keeps the admin token); create it or fix --data-dir`,
      );
    }
    mkdirSync(folder, { recursive: true });
  } else if (!statSync(folder).isDirectory()) {
    throw new StartupError("db_folder_missing", `data folder ${folder} is not a directory`);
  }
  return join(folder, "sessionmux.token");
}
