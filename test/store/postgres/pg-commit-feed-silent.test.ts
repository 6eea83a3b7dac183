import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { PostgresSessionStore } from "../../../src/store/postgres/postgres-store.js";
import type { CommitNotice } from "../../../src/store/session-store.js";
import { cleanupsAfterEach } from "../../support/cleanups.js";
import { dropSchema, pgUrl } from "../contract/backends.js";
import { userMessage } from "../open-store.js";
import { openStoreBehindProxy } from "./store-behind-proxy.js";
import { tcpTimer } from "./tcp-timer.js";

/**
 * A LISTEN connection whose network path goes silent (packets dropped, the server's machine gone
 * without a reset, a NAT that forgot the idle flow) is not closed: TCP notices after hours, and
 * until then the host hears no other host's commit while it believes it listens. The store asks
 * it `SELECT 1` every `listenCheckMs`; one left unanswered drops the connection, and the host
 * listens again and reads what it missed, as after any outage.
 */

const cleanups = cleanupsAfterEach();

/** The LISTEN connection of the commit feed, by the `application_name` its startup message names. */
const commitFeed = (opening: Buffer) => opening.includes("sessionmux-feed");

/**
 * The newest seq of `sessionId` a subscriber on `store` was given (0: none), whether the notice
 * was an append or a create: a create heard late is read with the appends made since.
 */
function headHeard(store: PostgresSessionStore, sessionId: string): () => number {
  let head = 0;
  store.subscribe(sessionId, (notice: CommitNotice) => {
    if (notice.kind === "append" || notice.kind === "create")
      for (const event of notice.events) head = Math.max(head, event.seq);
  });
  return () => head;
}

/**
 * Two stores on one schema: `far` reaches the database through a proxy the test silences and
 * checks its LISTEN connection every `listenCheckMs`; `near` connects directly. Session `s1` is
 * made on `near` and has one append, heard by `far`'s subscriber (`heard`: the newest seq).
 */
async function openFarAndNear(listenCheckMs: number) {
  const { store: far, proxy, schema } = await openStoreBehindProxy(cleanups, "smx_silent", { listenCheckMs });
  const near = await PostgresSessionStore.open(pgUrl!, { schema, maxConnections: 2 });
  cleanups.push(() => near.close());
  await near.create({ sessionId: "s1", owner: "alice", model: "m" });
  const heard = headHeard(far, "s1");
  await near.append("s1", [userMessage("before")]);
  await expect.poll(heard, { timeout: 20_000 }).toBe(2);
  return { far, near, proxy, heard };
}

describe.skipIf(!pgUrl)("PostgreSQL commit feed whose LISTEN connection goes silent", () => {
  it("drops the silent connection and still delivers another host's commit to its subscriber", async () => {
    const { near, proxy, heard } = await openFarAndNear(500);
    // only the LISTEN connection: its pool and group-commit connection go on (a check that came
    // late on a busy machine may have just replaced it, its predecessor not yet closed)
    expect(proxy.silenceAll(commitFeed)).toBeGreaterThanOrEqual(1);
    await near.append("s1", [userMessage("while silent")]);

    await expect.poll(heard, { timeout: 20_000 }).toBe(3);
  }, 30_000);
});

describe.skipIf(!pgUrl)("PostgreSQL commit feed reconnecting over a path that stays silent", () => {
  it("drops each LISTEN connection whose handshake the silent path swallows, and the first one through delivers what was missed", async () => {
    const { near, proxy, heard } = await openFarAndNear(300);
    // the LISTEN connection goes silent, and so does each one made after it: their handshake hangs
    let swallowed = 0;
    proxy.silenceNew((opening) => {
      if (!commitFeed(opening)) return false;
      swallowed += 1;
      return true;
    });
    expect(proxy.silenceAll(commitFeed)).toBeGreaterThanOrEqual(1);
    await near.append("s1", [userMessage("while silent")]);
    // each attempt is dropped by its check and the next one made: two were swallowed
    await expect.poll(() => swallowed, { timeout: 20_000 }).toBeGreaterThanOrEqual(2);
    proxy.silenceNew();

    await expect.poll(heard, { timeout: 20_000 }).toBe(3);
  }, 60_000);
});

describe.skipIf(!pgUrl || !existsSync("/proc/net/tcp"))("PostgreSQL commit feed's LISTEN socket", () => {
  it("has TCP keepalive on: the kernel probes it while it is idle", async () => {
    const url = new URL(pgUrl!);
    const schema = `smx_keepalive_${randomBytes(4).toString("hex")}`;
    cleanups.push(() => dropSchema(pgUrl!, schema));
    // no check comes within the test: the socket stays idle
    const store = await PostgresSessionStore.open(pgUrl!, {
      schema,
      maxConnections: 2,
      listenCheckMs: 600_000,
    });
    cleanups.push(() => store.close());
    const db = new pg.Client({ connectionString: pgUrl! });
    await db.connect();
    cleanups.push(() => db.end());
    // this store's LISTEN connection: its last statement names its schema's channel
    const { rows } = await db.query<{ port: number }>(
      `SELECT client_port AS port FROM pg_stat_activity
        WHERE application_name = 'sessionmux-feed' AND position($1 in query) > 0`,
      [`sessionmux_${schema}`],
    );
    expect(rows).toHaveLength(1);
    await expect
      .poll(() => tcpTimer(rows[0]!.port, Number(url.port || 5432)), { timeout: 10_000 })
      .toBe("02");
  });
});
