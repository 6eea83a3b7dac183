import type { SessionEvent } from "../../protocol/index.js";
import { QUERY_CHECK_MS } from "../../src/store/postgres/pg-backend-watch.js";
import { KEPT_AFTER_IDLE_MS } from "../../src/store/postgres/pg-group-commit.js";
import type { PostgresSessionStore } from "../../src/store/postgres/postgres-store.js";
import { openStoreBehindProxy, type StoreBehindProxy } from "../store/postgres/store-behind-proxy.js";
import type { Cleanup } from "../support/cleanups.js";
import { readWholeLog } from "../support/whole-log.js";

/**
 * A PostgreSQL store behind a proxy that can cut a COMMIT's answer, checking its waiting
 * connections at the store's own interval (the proxy fixture's is shorter): a write that
 * committed though the host lost the answer.
 */
export const openAnswerLostStore = (cleanups: Cleanup[], prefix: string): Promise<StoreBehindProxy> =>
  openStoreBehindProxy(cleanups, prefix, { queryCheckMs: QUERY_CHECK_MS });

/** Lets the group commit's connection idle past the bound of a batch on kept states. */
export const idleWriter = (): Promise<void> =>
  new Promise((resolve) => setTimeout(resolve, KEPT_AFTER_IDLE_MS + 100));

/** The session's whole log, or throws its read's status. */
export async function logOf(store: PostgresSessionStore, sessionId: string): Promise<SessionEvent[]> {
  const read = await readWholeLog(store, sessionId);
  if (read.status !== "ok") throw new Error(read.status);
  return read.events;
}
