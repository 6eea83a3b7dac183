/**
 * Why a host could not start. These never travel on the wire (protocol/errors.ts lists those):
 * they reach whoever started the host, the CLI prints them, and the message names the path or
 * port and what to do next.
 */
export const StartupErrorCodes = [
  "db_folder_missing",
  "db_missing",
  "db_in_use",
  "db_lock_damaged",
  "db_unreadable",
  "db_unwritable",
  "address_in_use",
  "listen_failed",
  "token_file_unreadable",
  "backup_target_exists",
  "backup_failed",
  "backup_corrupt",
  "restore_backup_missing",
  "restore_backup_invalid",
  "restore_backup_newer",
  "restore_failed",
  "db_option_invalid",
  "db_unreachable",
  "db_schema_missing",
  "db_earlier_builds_live",
  "host_id_invalid",
  "sqlite_only",
  "option_invalid",
  "tokens_file_invalid",
  "agent_unconfigured",
] as const;
export type StartupErrorCode = (typeof StartupErrorCodes)[number];

export class StartupError extends Error {
  readonly code: StartupErrorCode;

  constructor(code: StartupErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "StartupError";
    this.code = code;
  }
}

/**
 * `migrate` or `serve` refused to apply a migration beside hosts of an earlier build (see
 * `EarlierBuildsLiveError`): the message names each one's connection and what to do.
 */
export function earlierBuildsLive(err: Error): StartupError {
  return new StartupError("db_earlier_builds_live", err.message, { cause: err });
}
