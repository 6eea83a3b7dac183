import type pg from "pg";
import { SessionmuxError } from "../../../protocol/index.js";
import { holdPresence } from "./pg-host-presence.js";
import { PG_SCHEMA_VERSION } from "./pg-schema.js";

/**
 * The newest applied entry of the schema that needs earlier builds stopped (0: none), as
 * `schema_migrations` marks it (entry 19 on): `table` names it, on the store's search path unless
 * qualified. One index-free look at a table of a few dozen rows.
 */
export const stoppingVersion = (table = "schema_migrations") =>
  `SELECT coalesce(max(version) FILTER (WHERE stops_earlier_builds), 0) AS stopping FROM ${table}`;

/**
 * What a write is refused with once the schema holds an entry that needs hosts of this build
 * stopped: nothing of it was written, and another host (of the newer build) takes it, so it is
 * the retryable `host_shutting_down`, with both versions in `data`.
 */
export function buildOutdated(schemaVersion: number, buildVersion: number): SessionmuxError {
  return new SessionmuxError(
    "host_shutting_down",
    `the database schema is at version ${schemaVersion}, which needs hosts of earlier builds stopped, and this host's build knows version ${buildVersion}: it takes no more writes; replace it with a host of the newer build`,
    { data: { schemaVersion, buildSchemaVersion: buildVersion } },
  );
}

/**
 * Keeps a running host from writing by rules its build does not know. `migrate` applies an entry
 * that needs earlier builds stopped only while no connection holds the schema's presence lock,
 * and holds that lock's key in exclusive mode until it commits (see `refuseBesideHosts`). So the
 * group commit writes on a connection only once that connection holds the presence lock and, in a
 * statement after the lock was granted (whose snapshot sees whatever such a migration committed
 * before), read the newest entry that stops earlier builds: while the connection lives, no such
 * entry can be applied, and one applied while this host had none (its connection lost) is found
 * before the first write on the next. `saw` also takes what `/readyz` reads every few seconds, for
 * an entry written by other means (by hand, or a build without this check). Once one is found the
 * host stays refused: only a host of the newer build may write.
 */
export class PgSchemaFence {
  #stopping = 0;
  /** The write connections that hold the presence lock and were checked since. */
  readonly #fenced = new WeakSet<pg.ClientBase>();

  constructor(
    private readonly channel: string,
    private readonly buildVersion = PG_SCHEMA_VERSION,
  ) {}

  /** The newest entry that stops earlier builds, as read on the database by anyone. */
  saw(stopping: number): void {
    this.#stopping = Math.max(this.#stopping, stopping);
  }

  /** The error every write is refused with, or undefined while this build may write. */
  refusal(): SessionmuxError | undefined {
    return this.#stopping > this.buildVersion ? buildOutdated(this.#stopping, this.buildVersion) : undefined;
  }

  /**
   * Takes the presence lock on `client` and reads the schema's entries, once per connection. The
   * read is a statement of its own: under READ COMMITTED its snapshot is taken after the lock
   * statement returned, so after a migration that held the key committed.
   */
  async prepare(client: pg.ClientBase): Promise<void> {
    if (this.#fenced.has(client)) return;
    await client.query(holdPresence(this.channel));
    const { rows } = await client.query<{ stopping: number }>(stoppingVersion());
    this.#fenced.add(client);
    this.saw(Number(rows[0]?.stopping ?? 0));
  }
}
