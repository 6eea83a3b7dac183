/**
 * The key a session's current log is stored under (`projections.log_key`, migration 16): its
 * session id until a clear moves it to a fresh one. `alias` names a `projections` row.
 */
export const logKeyOf = (alias: string) => `coalesce(${alias}.log_key, ${alias}.session_id)`;

/**
 * The current log key of the session `sessionId` (an SQL expression), null when it has no
 * projection (deleted, or never created): a read of a deleted session's events finds none, though
 * its rows wait for the purger.
 */
export const currentLogKey = (sessionId: string) =>
  `(SELECT ${logKeyOf("lk")} FROM projections lk WHERE lk.session_id = ${sessionId})`;
