import { randomBytes } from "node:crypto";
import { afterEach } from "vitest";
import { PostgresSessionStore } from "../../../src/store/postgres/postgres-store.js";
import { dropSchema, pgUrl } from "../contract/backends.js";

export interface TwoHosts {
  a: PostgresSessionStore;
  b: PostgresSessionStore;
  schema: string;
}

/**
 * Opens two stores (hosts) on one fresh schema per call; both are closed and the schema dropped
 * after the test that opened them (as `storeFixture` does for one store).
 */
export function twoHostsFixture(prefix: string): () => Promise<TwoHosts> {
  const opened: TwoHosts[] = [];
  afterEach(async () => {
    await Promise.all(
      opened.splice(0).map(async ({ a, b, schema }) => {
        await Promise.all([a.close(), b.close()]);
        await dropSchema(pgUrl!, schema);
      }),
    );
  });
  return async () => {
    const schema = `${prefix}_${randomBytes(6).toString("hex")}`;
    const a = await PostgresSessionStore.open(pgUrl!, { schema, maxConnections: 2 });
    const b = await PostgresSessionStore.open(pgUrl!, { schema, maxConnections: 2 });
    const hosts = { a, b, schema };
    opened.push(hosts);
    return hosts;
  };
}

/** `twoHostsFixture` with session `sessionId` (owner `alice`) created on the first host. */
export function twoHostsWithSession(prefix: string, sessionId: string): () => Promise<TwoHosts> {
  const open = twoHostsFixture(prefix);
  return async () => {
    const hosts = await open();
    await hosts.a.create({ sessionId, owner: "alice", model: "m" });
    return hosts;
  };
}
