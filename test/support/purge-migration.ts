/** Undoes SQLite migration 13 (the unreferenced uploads' indexes), for a file put back to schema 12. */
export const UNDO_UNREFERENCED_UPLOAD_INDEXES = `DROP INDEX attachments_unreferenced_by_owner;
  DROP INDEX attachments_unreferenced_by_age;`;

/** Undoes SQLite migration 12 (the interactions' log keys), for a file put back to schema 11. */
export const UNDO_INTERACTION_LOG_KEYS = `DROP INDEX interactions_by_log_key;
  ALTER TABLE interactions DROP COLUMN log_key;`;

/**
 * Undoes SQLite migrations 11 and 12 (log keys, `purges`) on a file whose logs were never cleared,
 * for tests that put a file back to an older schema and migrate it again.
 */
export const UNDO_LOG_KEYS = `${UNDO_INTERACTION_LOG_KEYS}
  DROP TRIGGER attachments_uncounted;
  CREATE TRIGGER attachments_uncounted AFTER DELETE ON attachments BEGIN
    UPDATE owner_usage SET stored_bytes = stored_bytes - old.size WHERE owner = old.owner;
  END;
  DROP TABLE purges; DROP INDEX projections_by_log_key;
  ALTER TABLE projections DROP COLUMN log_key; ALTER TABLE projections DROP COLUMN data_bytes;
  ALTER TABLE projections DROP COLUMN data_bytes_seq;`;

/**
 * Undoes PostgreSQL migrations 16 and 17 (log keys, `purges`) on a schema whose logs were never
 * cleared, for tests that put a schema back to an older version and migrate it again (migration 16
 * puts the attachment trigger's function back as it writes it).
 */
export const UNDO_PG_LOG_KEYS = `ALTER TABLE interactions DROP COLUMN log_key; DROP TABLE purges;
  ALTER TABLE projections DROP COLUMN log_key, DROP COLUMN data_bytes, DROP COLUMN data_bytes_seq;`;
