import type { WriteFailure } from "../store/write-health.js";
import { NotReadyError } from "./readiness-probe.js";

/** What readiness asks of a store about its writes (both stores answer it). */
export interface StoreWriteHealth {
  writeFailure(): WriteFailure | undefined;
  probeStorage(): Promise<void>;
}

/**
 * `/readyz`: first the database's own check (`reachable`: SQLite's write lock, PostgreSQL's
 * server taking writes), whose failure answers `db_unavailable`; then not ready while the store's
 * writes fail on storage (a full disk, storage or a database turned read-only), since the own
 * check, which writes nothing, still passes then. While writes fail, each check tries a write of
 * its own that needs room (`probeStorage`): a host that readiness took out of a balancer gets no
 * writes from clients, and must still see the disk get room again.
 */
export function storeReadyCheck(
  store: StoreWriteHealth,
  reachable: () => void | Promise<void>,
): () => Promise<void> {
  return async () => {
    await reachable();
    if (!store.writeFailure()) return;
    try {
      await store.probeStorage();
    } catch (err) {
      const failure = store.writeFailure();
      throw new NotReadyError(
        "store_writes_failing",
        `the store's writes have failed on storage since ${new Date(failure?.since ?? Date.now()).toISOString()}` +
          `${failure?.code ? ` (${failure.code})` : ""}`,
        { cause: err },
      );
    }
  };
}
