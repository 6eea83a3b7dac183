import type { WriteFailure } from "../store/write-health.js";
import { NotReadyError } from "./readiness-probe.js";

/** What readiness asks of a store about its writes (both stores answer it). */
export interface StoreWriteHealth {
  writeFailure(): WriteFailure | undefined;
  /** Write transactions committed so far. */
  writesCommitted(): number;
  probeStorage(): Promise<void>;
}

export interface StoreReadyOptions {
  /**
   * Also probe storage on a check when no write committed since the previous check, and wait this
   * long for it: the database's own check cannot see storage that refuses writes (PostgreSQL: a
   * database turned read-only, a full tablespace), so a host nobody writes to would answer ready
   * while its first write would fail. A probe still queued after the wait (behind the host's own
   * writes, which are then not idle) passes the check; its outcome counts at the next one. Off: a
   * host learns of such failures from its writes only.
   */
  idleProbeWaitMs?: number;
}

/** Settles with `promise`, or with "pending" once `ms` passed first. */
function within<T>(promise: Promise<T>, ms: number): Promise<T | "pending"> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const waited = new Promise<"pending">((resolve) => {
    timer = setTimeout(() => resolve("pending"), ms);
  });
  return Promise.race([promise, waited]).finally(() => clearTimeout(timer));
}

/**
 * `/readyz`: first the database's own check (`reachable`: SQLite's write lock, PostgreSQL's
 * server taking writes), whose failure answers `db_unavailable`; then not ready while the store's
 * writes fail on storage (a full disk, storage or a database turned read-only), since the own
 * check, which writes nothing, still passes then. While writes fail, each check tries a write of
 * its own that needs room (`probeStorage`): a host that readiness took out of a balancer gets no
 * writes from clients, and must still see the disk get room again. With `idleProbeWaitMs`, a
 * check also tries one when nothing committed since the previous check (at most one per check,
 * never two at once), so the answer holds within two checks for a host nobody writes to as well.
 */
export function storeReadyCheck(
  store: StoreWriteHealth,
  reachable: () => void | Promise<void>,
  options: StoreReadyOptions = {},
): () => Promise<void> {
  let probing: Promise<void> | undefined;
  // the commits counted at the end of the previous check (none before the first, which only counts)
  let seen: number | undefined;
  const probe = () => {
    probing ??= store.probeStorage().finally(() => {
      probing = undefined;
    });
    return probing;
  };
  const notReady = (err: unknown) => {
    const failure = store.writeFailure();
    return new NotReadyError(
      "store_writes_failing",
      `the store's writes have failed on storage since ${new Date(failure?.since ?? Date.now()).toISOString()}` +
        `${failure?.code ? ` (${failure.code})` : ""}`,
      { cause: err },
    );
  };
  return async () => {
    await reachable();
    try {
      if (store.writeFailure()) await probe();
      else if (options.idleProbeWaitMs !== undefined && store.writesCommitted() === seen) {
        const running = probe();
        // a probe that fails after the wait is recorded by the store: the next check sees it
        running.catch(() => undefined);
        await within(running, options.idleProbeWaitMs);
      }
    } catch (err) {
      throw notReady(err);
    } finally {
      seen = store.writesCommitted();
    }
  };
}
