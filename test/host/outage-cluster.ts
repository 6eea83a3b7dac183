import { setTimeout as sleep } from "node:timers/promises";
import { PostgresSessionStore } from "../../src/store/postgres/postgres-store.js";
import { refusableRole } from "../store/postgres/refusable-role.js";
import type { Cleanup } from "../support/cleanups.js";
import { type Cluster, openCluster, pgUrl } from "./multi-host-fixture.js";

/** The first reconnect comes within 100 ms of the drop: refused past it, a later attempt gets back in. */
const PAST_FIRST_RECONNECT_MS = 400;

/**
 * A cluster of one host, `host-a`, whose next host, `host-b` (`cluster.addHost()`), connects as a
 * role the test can refuse, so its LISTEN connection can be kept down while `host-a` writes. The
 * schema's tables are that role's, made first. `lockOut` ends host-b's connections and refuses
 * new ones; `letIn` takes it back once its first reconnect has been refused.
 */
export async function openOutageCluster(cleanups: Cleanup[], rolePrefix: string) {
  const refusable = await refusableRole(rolePrefix);
  cleanups.push(() => refusable.drop());
  await (await PostgresSessionStore.open(refusable.url, { schema: refusable.schema })).close();
  const cluster: Cluster = await openCluster(1, {
    on: { schema: refusable.schema, url: (hostId) => (hostId === "host-b" ? refusable.url : pgUrl!) },
  });
  cleanups.push(() => cluster.dispose());
  return {
    cluster,
    /** Resolves once every transaction running in the database now has ended (see `runningEnded`). */
    runningEnded: () => refusable.runningEnded(),
    lockOut: () => refusable.lockOut(),
    async letIn(): Promise<void> {
      await sleep(PAST_FIRST_RECONNECT_MS);
      await refusable.letIn();
    },
  };
}
