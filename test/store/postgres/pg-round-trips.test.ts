import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { PostgresSessionStore } from "../../../src/store/postgres/postgres-store.js";
import { cleanupsAfterEach } from "../../support/cleanups.js";
import { startTcpProxy } from "../../support/tcp-proxy.js";
import { dropSchema, pgUrl } from "../contract/backends.js";
import { delta } from "../open-store.js";

const cleanups = cleanupsAfterEach();

/**
 * The store's connections through a TCP proxy that counts round trips: a connection begins one
 * each time it sends after it heard the server (or first sends), on every connection at once.
 */
async function countedStore() {
  const url = new URL(pgUrl!);
  let trips = 0;
  const proxy = await startTcpProxy(Number(url.port || 5432), {
    tap: () => {
      let heard = true;
      return {
        fromClient() {
          if (heard) trips++;
          heard = false;
        },
        fromHost() {
          heard = true;
        },
      };
    },
  });
  cleanups.push(() => proxy.stop());
  url.hostname = "127.0.0.1";
  url.port = String(proxy.port);
  const schema = `trips_${randomBytes(4).toString("hex")}`;
  cleanups.push(() => dropSchema(pgUrl!, schema));
  const store = await PostgresSessionStore.open(url.href, { schema, maxConnections: 1 });
  cleanups.push(() => store.close());
  return {
    store,
    schema,
    /** Round trips begun during `write`, on every connection of the store. */
    async tripsOf(write: () => Promise<unknown>): Promise<number> {
      const before = trips;
      await write();
      return trips - before;
    },
  };
}

describe.skipIf(!pgUrl)("a PostgreSQL store's writes on the wire", () => {
  it("an append to a session this host wrote last waits for one round trip; after another host's write, for a few", async () => {
    const { store, schema, tripsOf } = await countedStore();
    await store.create({ sessionId: "s", owner: "alice", model: "m" });
    for (let i = 0; i < 5; i++) expect(await tripsOf(() => store.append("s", [delta("t", `a${i}`)]))).toBe(1);
    // another host (not counted) writes the session: the kept state no longer holds, the rows are read again
    const other = await PostgresSessionStore.open(pgUrl!, { schema, maxConnections: 1 });
    cleanups.push(() => other.close());
    await other.append("s", [delta("t", "b")]);
    const again = await tripsOf(() => store.append("s", [delta("t", "c")]));
    expect(again).toBeGreaterThan(1);
    expect(again).toBeLessThanOrEqual(3);
    expect(await tripsOf(() => store.append("s", [delta("t", "d")]))).toBe(1);
  });
});
