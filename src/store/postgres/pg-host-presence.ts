/**
 * Whether another host listens on a schema's channel, so that a host alone on its database sends
 * no NOTIFY at all: a NOTIFY takes a cluster-wide lock at its commit and wakes every listener, the
 * host's own included, which was the largest cost of a batch after its rows.
 *
 * Every host's LISTEN connection holds a shared advisory lock on the channel's key from before its
 * LISTEN until it closes (PostgreSQL releases it when the connection ends, however it ends). After
 * each COMMIT the host sends its NOTIFY on that same connection, guarded by a request for the key
 * in exclusive mode for that one statement: PostgreSQL grants it only when no other connection
 * holds the key (a connection's own locks never conflict with its requests), and then nothing is
 * sent. A host that starts meanwhile is granted its shared lock only once that statement ended,
 * so after the COMMIT: its LISTEN, and every read its followers make, come later and see the rows.
 *
 * Builds from before this lock listened without it, on a connection named `LEGACY_LISTENER` that
 * ran nothing after its LISTEN; while one listens on the channel (looked up at each LISTEN and
 * every `LEGACY_CHECK_MS`), every batch is announced unconditionally, so a cluster can be upgraded
 * one host at a time.
 */

/** The first half of every presence key (the second is the channel's hash): "SM". */
const PRESENCE_CLASS = 0x534d;
const keyOf = (channel: string) => `${PRESENCE_CLASS}, hashtext(${channel})`;

/** Held by a LISTEN connection from before its LISTEN (the channel as a literal). */
export const holdPresence = (channel: string) => `SELECT pg_advisory_lock_shared(${keyOf(`'${channel}'`)})`;

/** $1 channel, $2 payload: sent unless no other connection holds the channel's presence lock. */
export const NOTIFY_UNLESS_ALONE = `SELECT pg_notify($1, $2) WHERE NOT pg_try_advisory_xact_lock(${keyOf("$1")})`;

/** $1 channel, $2 payload: sent whoever listens. */
export const NOTIFY = "SELECT pg_notify($1, $2)";

/** The `application_name` of the LISTEN connections of builds that hold no presence lock. */
export const LEGACY_LISTENER = "sessionmux-listen";

/**
 * Whether such a connection listens on the channel (the channel as a literal). Another role's
 * connection shows no query text, so it counts whatever it listens to.
 */
export const legacyListeners = (channel: string) => `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
  WHERE application_name = '${LEGACY_LISTENER}' AND datname = current_database()
    AND (starts_with(query, 'LISTEN "${channel}"') OR query = '<insufficient privilege>')) AS legacy`;

/** How often a host alone looks for legacy listeners again. */
export const LEGACY_CHECK_MS = 10_000;
