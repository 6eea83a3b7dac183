/**
 * Undoes SQLite migration 11 (log keys, `purges`) on a file whose logs were never cleared, for tests
 * that put a file back to an older schema and migrate it again.
 */
export const UNDO_LOG_KEYS = `DROP TRIGGER attachments_uncounted;
  CREATE TRIGGER attachments_uncounted AFTER DELETE ON attachments BEGIN
    UPDATE owner_usage SET stored_bytes = stored_bytes - old.size WHERE owner = old.owner;
  END;
  DROP TABLE purges; DROP INDEX projections_by_log_key;
  ALTER TABLE projections DROP COLUMN log_key; ALTER TABLE projections DROP COLUMN data_bytes;
  ALTER TABLE projections DROP COLUMN data_bytes_seq;`;
