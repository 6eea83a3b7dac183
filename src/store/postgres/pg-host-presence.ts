/**
 * Whether another host is on a schema, so that a host alone on its database sends no NOTIFY at
 * all: a NOTIFY takes a cluster-wide lock at its commit and wakes every listener, the host's own
 * included, which then hands it to the host to be recognised as its own and dropped.
 *
 * Every host's group-commit connection holds a shared advisory lock on the channel's key for as
 * long as it is open, and takes it before the host's LISTEN (see `PgCommitFeed.start`). The NOTIFY
 * behind each COMMIT, on that same connection, is guarded by a request for the key in exclusive
 * mode for that one statement: PostgreSQL grants it only when no other connection holds the key
 * (a connection's own locks never conflict with its requests), and then nothing is sent. A host
 * that starts meanwhile is granted its shared lock only once that statement ended, so after the
 * COMMIT: its LISTEN, and every read its followers make, come later and see the rows. A host whose
 * group-commit connection ends listens again once it has another (and the lock), reading what its
 * followers follow, as after any LISTEN outage: nobody announced anything to it meanwhile.
 *
 * Builds from before this lock listened without it, on a connection named `LEGACY_LISTENER` that
 * ran nothing after its LISTEN; while one listens on the channel (looked up at each LISTEN and
 * every `LEGACY_CHECK_MS`), every batch is announced unconditionally, so a cluster can be upgraded
 * one host at a time.
 */

/** The first half of every presence key (the second is the channel's hash): "SM". */
export const PRESENCE_CLASS = 0x534d;
/** The two halves of the channel's presence key (the channel as SQL: a literal or a parameter). */
export const presenceKey = (channel: string) => `${PRESENCE_CLASS}, hashtext(${channel})`;
const keyOf = presenceKey;

/** Taken by a group-commit connection as its first statement (the channel as a literal). */
export const holdPresence = (channel: string) => `SELECT pg_advisory_lock_shared(${keyOf(`'${channel}'`)})`;

/**
 * A condition of the NOTIFY behind a COMMIT: whether to send it (the channel as the parameter
 * `channel`, and `everyone` a boolean parameter: send whoever is present).
 */
export const othersPresent = (channel: string, everyone: string) =>
  `(${everyone}::boolean OR NOT pg_try_advisory_xact_lock(${keyOf(channel)}))`;

/** The `application_name` of the LISTEN connections of builds that hold no presence lock. */
export const LEGACY_LISTENER = "sessionmux-listen";

/**
 * Whether such a connection listens on the channel (the channel as a literal). Another role's
 * connection shows no query text, so it counts whatever it listens to.
 */
export const legacyListeners = (channel: string) => `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
  WHERE application_name = '${LEGACY_LISTENER}' AND datname = current_database()
    AND (starts_with(query, 'LISTEN "${channel}"') OR query = '<insufficient privilege>')) AS legacy`;

/** How often a host looks for legacy listeners again. */
export const LEGACY_CHECK_MS = 10_000;
