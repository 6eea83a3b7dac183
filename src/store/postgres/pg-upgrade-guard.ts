import type pg from "pg";
import { LEGACY_LISTENER, PRESENCE_CLASS, presenceKey } from "./pg-host-presence.js";

/**
 * A host on the schema, as the database sees it: the connection that holds its presence lock (a
 * host since that lock) or listens as builds before it did (`LEGACY_LISTENER`). Hosts of earlier
 * builds have no way to say which build they run, and need none: every host on a schema opened it
 * at a version no later than the schema's (opening migrates first), so each one is of a build
 * earlier than any entry not applied yet.
 */
export interface HostOnSchema {
  /** The server's backend process of that connection, as `pg_terminate_backend` takes it. */
  pid: number;
  /** Its `application_name`. */
  name: string;
  /** The host's address as the server sees it; null over a Unix socket. */
  address: string | null;
  /** When that connection was made (ISO 8601). */
  since: string;
}

/**
 * `migrate` (or a `serve` that migrates) refused an entry that needs every host of an earlier build
 * stopped, because hosts are still on the schema: applied beside them, they would go on reading or
 * writing by the rules the entry replaced. Nothing was applied.
 */
export class EarlierBuildsLiveError extends Error {
  override readonly name = "EarlierBuildsLiveError";
  readonly code = "db_earlier_builds_live";

  constructor(
    readonly schema: string,
    /** The first entry not applied that needs them stopped. */
    readonly version: number,
    readonly hosts: readonly HostOnSchema[],
  ) {
    const named = hosts
      .map(
        (host) =>
          `backend ${host.pid} (${host.name}${host.address ? ` from ${host.address}` : ""}, since ${host.since})`,
      )
      .join(", ");
    super(
      `schema "${schema}" cannot be migrated to version ${version} while hosts of an earlier build run on it, ` +
        `for they would read or write by the rules it replaces; ${hosts.length} still connected: ${named}. ` +
        "Stop every such host (each sessionmux serve, rebuild-projections or embedding app on this schema), then migrate again; " +
        "a host that is gone while the server still keeps its connection is ended with SELECT pg_terminate_backend(<backend>)",
    );
  }
}

/**
 * The connections holding the schema's presence lock (granted, in the shared mode hosts hold it),
 * and those of builds before that lock listening on its channel (another role's shows no query,
 * so it counts, as `legacyListeners` counts it).
 */
const HOSTS_ON = `SELECT a.pid, a.application_name AS name, host(a.client_addr) AS address,
    to_char(a.backend_start AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS since
  FROM pg_stat_activity a
  WHERE a.pid IN (
      SELECT l.pid FROM pg_locks l
      WHERE l.locktype = 'advisory' AND l.granted AND l.mode = 'ShareLock'
        AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
        AND l.classid = ${PRESENCE_CLASS} AND l.objid = hashtext($1)::oid AND l.objsubid = 2)
    OR (a.application_name = '${LEGACY_LISTENER}' AND a.datname = current_database()
      AND (starts_with(a.query, 'LISTEN "' || $1 || '"') OR a.query = '<insufficient privilege>'))
  ORDER BY a.pid`;

/** A presence holder may leave between the try and the look: the try is made again this often. */
const TRIES = 3;

/**
 * Inside `migrate`'s transaction: returns once no host is on the schema, holding the presence key
 * in exclusive mode to the transaction's end, so no host takes the lock (and writes by its rules)
 * until the entries committed: a host of this build takes it on each new write connection, then
 * reads which entries the schema holds (see `PgSchemaFence`). Throws `EarlierBuildsLiveError`
 * naming the hosts otherwise.
 */
export async function refuseBesideHosts(
  client: pg.ClientBase,
  schema: string,
  version: number,
): Promise<void> {
  const channel = `sessionmux_${schema}`;
  for (let tried = 1; ; tried++) {
    const taken = await client.query<{ alone: boolean }>(
      `SELECT pg_try_advisory_xact_lock(${presenceKey("$1")}) AS alone`,
      [channel],
    );
    const hosts = (await client.query<HostOnSchema>(HOSTS_ON, [channel])).rows;
    if (hosts.length > 0) throw new EarlierBuildsLiveError(schema, version, hosts);
    if (taken.rows[0]?.alone) return;
    if (tried === TRIES) throw new EarlierBuildsLiveError(schema, version, []);
  }
}
