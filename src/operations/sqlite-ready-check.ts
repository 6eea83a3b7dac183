import type { SqliteSessionStore } from "../store/sqlite-store.js";
import { NotReadyError } from "./readiness-probe.js";

/**
 * `/readyz` on SQLite: not ready while the store's writes fail on storage (a full disk, storage
 * turned read-only), since taking the write lock, which writes nothing, still passes then; else
 * the write lock is taken (`writable`). While writes fail, each check tries a write of its own
 * that needs room (`probeStorage`): a host that readiness took out of a balancer gets no writes
 * from clients, and must still see the disk get room again.
 */
export function sqliteReadyCheck(
  store: Pick<SqliteSessionStore, "writeFailure" | "probeStorage">,
  writable: { check(): void },
): () => Promise<void> {
  return async () => {
    if (store.writeFailure()) {
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
    }
    writable.check();
  };
}
