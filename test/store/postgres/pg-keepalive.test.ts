import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { PostgresSessionStore } from "../../../src/store/postgres/postgres-store.js";
import { cleanupsAfterEach } from "../../support/cleanups.js";
import { dropSchema, pgUrl } from "../contract/backends.js";
import { tcpTimer } from "./tcp-timer.js";

/**
 * Every connection of the store has TCP keepalive, not only the LISTEN ones: a pooled read
 * connection, or the group commit's, whose path goes silent while it idles is found by the
 * kernel's probes and dropped, instead of by the statement sent over it next.
 */

const cleanups = cleanupsAfterEach();

describe.skipIf(!pgUrl || !existsSync("/proc/net/tcp"))("a PostgreSQL store's sockets", () => {
  it("have TCP keepalive on, the pooled read connection and the group commit's included", async () => {
    const url = new URL(pgUrl!);
    const schema = `smx_keepalive_${randomBytes(4).toString("hex")}`;
    cleanups.push(() => dropSchema(pgUrl!, schema));
    // every connection of this store under one name of its own (the address's name wins)
    const name = schema;
    url.searchParams.set("application_name", name);
    const store = await PostgresSessionStore.open(url.toString(), {
      schema,
      maxConnections: 2,
      listenCheckMs: 600_000,
    });
    cleanups.push(() => store.close());
    // a write and a read: the group commit's connection and a pooled one are open, then idle
    await store.create({ sessionId: "s1", owner: "alice", model: "m" });
    expect((await store.readAfter("s1", 0, 1000)).status).toBe("ok");
    expect(store.poolStats().reads.total).toBeGreaterThanOrEqual(1);
    expect(store.poolStats().writer.total).toBe(1);

    const db = new pg.Client({ connectionString: pgUrl! });
    await db.connect();
    cleanups.push(() => db.end());
    const { rows } = await db.query<{ port: number }>(
      "SELECT client_port AS port FROM pg_stat_activity WHERE application_name = $1",
      [name],
    );
    // the pooled connections, the group commit's and the LISTEN connection
    expect(rows.length).toBeGreaterThanOrEqual(3);
    const timers = () => rows.map(({ port }) => tcpTimer(port, Number(url.port || 5432)));
    await expect.poll(timers, { timeout: 5_000 }).toEqual(rows.map(() => "02"));
  });
});
