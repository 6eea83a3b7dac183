import { dirname } from "node:path";
import type { Logger } from "pino";
import type { CallInbox } from "../store/call-inbox.js";
import type { CallInboxLimits } from "../store/call-inbox-limits.js";
import { closeEvery } from "../store/close-every.js";
import type { GroupCommitStats } from "../store/group-commit.js";
import type { HostStore } from "../store/live-state-store.js";
import { queryWatch } from "../store/postgres/pg-backend-watch.js";
import { PgCallInbox } from "../store/postgres/pg-call-inbox.js";
import { EarlierBuildsLiveError } from "../store/postgres/pg-upgrade-guard.js";
import { PostgresSessionStore } from "../store/postgres/postgres-store.js";
import type { SessionLeaseStore } from "../store/session-lease.js";
import { SqliteSessionStore } from "../store/sqlite-store.js";
import type { PoolStats, StoreMetrics } from "../store/store-metrics.js";
import type { UploadLedger } from "../transport/http/route-context.js";
import { prepareDatabasePath } from "./database-path.js";
import { type DatabaseTarget, databaseTarget, describeTarget, redactUrl } from "./database-target.js";
import { inUseRefusal } from "./exclusive-access.js";
import { pgReadyCheck } from "./pg-ready-check.js";
import { pgUploadSweeper } from "./pg-upload-sweeper.js";
import { NotReadyError } from "./readiness-probe.js";
import { sqliteOpenRefusal } from "./sqlite-open-refusal.js";
import { sqliteWritableCheck } from "./sqlite-writable-check.js";
import { removeStalePartials } from "./stale-partials.js";
import { earlierBuildsLive, StartupError } from "./startup-error.js";
import { storeReadyCheck } from "./store-ready-check.js";

/** Expires uploads no prompt references (both stores ship one). */
export interface UploadSweeper extends UploadLedger {
  start(ttlMs: number, everyMs: number, onError: (err: unknown) => void): void;
  stop(): void;
}

/** What a host runs on, whichever database `--db` names. */
export type HostDatabaseStore = HostStore & {
  /** Write-transaction counters of the store's group commit. */
  stats(): GroupCommitStats;
  close(): Promise<void>;
};

export interface HostDatabaseOptions {
  db: string;
  /** PostgreSQL only. @default "public" */
  schema?: string;
  /** SQLite only: create a missing folder. */
  createFolder?: boolean;
  /** PostgreSQL only: this host's id in commit notices (its own are skipped). */
  hostId: string;
  /** PostgreSQL only: pooled connections of the store. @default 10 */
  poolSize?: number;
  /** PostgreSQL only: what the call inbox holds at once (each bound at its default when left out). */
  callInbox?: Partial<CallInboxLimits>;
  /** PostgreSQL only: see `PostgresStoreOptions.listenCheckMs` (the store's and the call inbox's). @default 5000 */
  listenCheckMs?: number;
  /**
   * PostgreSQL only: see `PostgresStoreOptions.queryCheckMs` (the store's pools, the call inbox's
   * and the uploads sweeper's, over one check connection at a time). @default 5000
   */
  queryCheckMs?: number;
  metrics: StoreMetrics;
  logger?: Logger;
}

export interface HostDatabase {
  readonly target: DatabaseTarget;
  readonly store: HostDatabaseStore;
  /** Expiry and quota of uploads no prompt references yet. */
  readonly uploads: UploadSweeper;
  /** For `/readyz`: throws when the database would not take this host's writes now. */
  ready(): Promise<void>;
  /** How logs name the database (a PostgreSQL password is masked). */
  readonly description: string;
  /**
   * A networked database's connection pools now, by name (PostgreSQL: the store's `reads` and
   * `writer`, the call `inbox`, the `uploads` sweeper and the `readiness` check), for sizing the
   * server's connection limit; an embedded one has none.
   */
  pools?(): Record<string, PoolStats>;
  /** A shared database (PostgreSQL): the leases and the call inbox hosts coordinate through. */
  readonly shared?: {
    leases: SessionLeaseStore;
    inbox: CallInbox;
    /** The control baseline's generation on every host of this database (see `ClusterOptions`). */
    generation: string;
  };
  close(): Promise<void>;
}

// SQLSTATEs of a server that took the connection but no write: a read-only transaction (25006),
// a disk full (53100), no rights to write (42501)
const PG_REFUSED_WRITE = new Set(["25006", "53100", "42501"]);

/**
 * How long a readiness check waits for the storage probe of an idle host: as long as PostgreSQL's
 * own check may take (`pgReadyCheck`); SQLite's probe is one transaction on the event loop.
 */
const IDLE_PROBE_WAIT_MS = 2_000;

function pgRefusedWrite(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === "string" && PG_REFUSED_WRITE.has(code);
}

/** Opens (creating and migrating when missing) the store `db` names: a file path or a postgres:// URL. */
export async function openHostDatabase(options: HostDatabaseOptions): Promise<HostDatabase> {
  // named as createSessionmux takes them: `serve` checked its flags before, naming those
  const target = databaseTarget(options.db, options.schema, { db: "db", schema: "dbSchema" });
  if (target.kind === "sqlite") return openSqlite(target.path, options);
  let store: PostgresSessionStore | undefined;
  let inbox: PgCallInbox | undefined;
  let generation: string;
  const watch = queryWatch(target.url, options.queryCheckMs);
  const listening = options.listenCheckMs !== undefined ? { listenCheckMs: options.listenCheckMs } : {};
  try {
    store = await PostgresSessionStore.open(target.url, {
      schema: target.schema,
      hostId: options.hostId,
      metrics: options.metrics,
      ...(options.poolSize !== undefined ? { maxConnections: options.poolSize } : {}),
      ...listening,
      queryWatch: watch,
    });
    const writer = store;
    inbox = await PgCallInbox.open(target.url, {
      ...options.callInbox,
      schema: target.schema,
      writesRefused: () => writer.buildOutdated(),
      ...listening,
      queryWatch: watch,
    });
    generation = await store.storeIdentity();
  } catch (err) {
    await inbox?.close();
    await store?.close();
    // hosts of an earlier build still on the schema: stopping them is the way on, not the network
    if (err instanceof EarlierBuildsLiveError) throw earlierBuildsLive(err);
    const reason = err instanceof Error ? err.message : String(err);
    const named = `PostgreSQL database ${redactUrl(target.url)} (schema ${target.schema})`;
    // the server answered, but refused to write (creating or migrating the schema): not a
    // network matter, so an operator is sent to the server's disk and the database's settings
    if (pgRefusedWrite(err)) {
      throw new StartupError(
        "db_unwritable",
        `cannot write ${named}: ${reason}; check that the server's disk has room and that the database takes writes from this role (not a standby, default_transaction_read_only off, rights to create in it)`,
        { cause: err },
      );
    }
    throw new StartupError("db_unreachable", `cannot open ${named}: ${reason}`, { cause: err });
  }
  const check = pgReadyCheck(target.url, undefined, target.schema);
  const opened = store;
  const uploads = pgUploadSweeper(
    target.url,
    target.schema,
    watch,
    () => opened.buildOutdated() === undefined,
  );
  const openedInbox = inbox;
  return {
    target,
    store: opened,
    uploads,
    // the server's own check writes nothing: an idle host probes storage (see `storeReadyCheck`)
    ready: storeReadyCheck(opened, () => reachableAndCurrent(opened, check), {
      idleProbeWaitMs: IDLE_PROBE_WAIT_MS,
    }),
    pools: () => ({
      ...opened.poolStats(),
      inbox: openedInbox.poolStats(),
      uploads: uploads.poolStats(),
      readiness: check.poolStats(),
    }),
    description: describeTarget(target),
    shared: { leases: opened, inbox: openedInbox, generation },
    // every pool and listener is closed though one before it failed; the first failure is thrown
    close: () =>
      closeEvery([
        () => check.close(),
        () => uploads.close(),
        () => openedInbox.close(),
        () => opened.close(),
      ]),
  };
}

/**
 * The server takes writes, and the schema holds no entry that needs hosts of this build stopped:
 * the check reads the newest such entry with the server's state, and the store refuses writes
 * from the first one seen (see `PgSchemaFence`), here or on its own write connection.
 */
async function reachableAndCurrent(
  store: PostgresSessionStore,
  check: { check(): Promise<number> },
): Promise<void> {
  store.sawStoppingVersion(await check.check());
  const outdated = store.buildOutdated();
  if (outdated) throw new NotReadyError("build_outdated", outdated.message, { cause: outdated });
}

function openSqlite(path: string, options: HostDatabaseOptions): HostDatabase {
  const file = prepareDatabasePath(path, { createFolder: options.createFolder ?? false });
  let store: SqliteSessionStore;
  try {
    store = SqliteSessionStore.open(file, {
      metrics: options.metrics,
      ...(options.logger ? { logger: options.logger } : {}),
    });
  } catch (err) {
    // another host holds the file: refused as migrate and rebuild-projections refuse it
    const inUse = inUseRefusal(err);
    if (inUse) throw inUse;
    // named in the error with SQLite's reason, and whether the file cannot be written or read
    throw sqliteOpenRefusal(file, err);
  }
  // a restore killed part way leaves its copy of the backup (a whole database's size) beside the
  // file; a restore still running is left alone (its process is alive)
  removeStalePartials(dirname(file), "restoring");
  let writable: ReturnType<typeof sqliteWritableCheck>;
  try {
    writable = sqliteWritableCheck(file);
  } catch (err) {
    void store.close();
    throw err;
  }
  return {
    target: { kind: "sqlite", path: file },
    store,
    uploads: store.attachmentSweeper(),
    // the write lock's check writes nothing, and a WAL commit needs room the file may not get:
    // an idle host probes storage too (see `storeReadyCheck`)
    ready: storeReadyCheck(store, () => writable.check(), { idleProbeWaitMs: IDLE_PROBE_WAIT_MS }),
    description: file,
    async close() {
      writable.close();
      await store.close();
    },
  };
}
