import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { SessionmuxError } from "../../../protocol/index.js";
import { PgCallInbox } from "../../../src/store/postgres/pg-call-inbox.js";
import type { PostgresSessionStore } from "../../../src/store/postgres/postgres-store.js";
import { cleanupsAfterEach } from "../../support/cleanups.js";
import { startTcpProxy } from "../../support/tcp-proxy.js";
import { dropSchema, pgUrl } from "../contract/backends.js";
import { call, NO_POLL } from "./call-inbox-rows.js";
import { openStoreBehindProxy } from "./store-behind-proxy.js";

/**
 * After a network blip, a pool still holds idle connections whose sockets died meanwhile (the
 * server ended them; keepalive finds them only after its probes), and the next statement handed
 * one fails at once though the database is back. A read is tried again on the pool's next
 * connection, so its caller sees no error; each dead one it met is dropped from the pool; and
 * with no new connection to be had either, the read fails `persistence_failure` at once, having
 * tried no more than there were dead connections and one new one.
 */

const cleanups = cleanupsAfterEach();

/** The pooled connections (`sessionmux`), by the `application_name` their startup message names. */
const pooled = (opening: Buffer) => opening.includes("application_name\0sessionmux\0");

/** A store behind a proxy whose read pool holds its two connections, both idle. */
async function storeWithIdlePool() {
  const behind = await openStoreBehindProxy(cleanups, "smx_read_idle_lost");
  const { store } = behind;
  await store.create({ sessionId: "s1", owner: "alice", model: "m" });
  // reads at once, so the pool makes its second connection
  await Promise.all(Array.from({ length: 4 }, () => store.list({ limit: 10 })));
  await expect.poll(() => store.poolStats().reads).toEqual({ total: 2, idle: 2, waiting: 0 });
  return behind;
}

async function listed(store: PostgresSessionStore): Promise<unknown> {
  return store.list({ limit: 10 }).then(
    ({ rows }) => rows.map((row) => row.sessionId),
    (err: unknown) => (err instanceof SessionmuxError ? { code: err.code } : { untyped: String(err) }),
  );
}

describe.skipIf(!pgUrl)("PostgreSQL reads on pooled connections that died while idle", () => {
  it("are tried again on another connection, the caller seeing no error, and the dead ones leave the pool", async () => {
    const { store, proxy } = await storeWithIdlePool();
    const accepted = proxy.accepted;
    // both idle read connections (and the group commit's) end at the server's side, unseen
    expect(proxy.cutAllUnnoticed(pooled)).toBe(3);

    expect(await listed(store)).toEqual(["s1"]);
    // each dead one was dropped as it failed; the read got a new connection
    expect(store.poolStats().reads).toEqual({ total: 1, idle: 1, waiting: 0 });
    expect(proxy.accepted - accepted).toBe(1);
    // the live state's snapshot, several statements on one connection, is a read too
    expect(proxy.cutAllUnnoticed(pooled)).toBe(1);
    // (s1 has no live state to list: the page answered is the point)
    expect(await store.liveStatePage(null, 10)).toEqual({ sessions: [], next: null });
    expect(store.poolStats().reads).toEqual({ total: 1, idle: 1, waiting: 0 });
  }, 30_000);

  it("fails persistence_failure at once when no new connection can be made either, the dead ones dropped", async () => {
    const { store, proxy } = await storeWithIdlePool();
    const accepted = proxy.accepted;
    proxy.refuseNew(true);
    proxy.cutAllUnnoticed(pooled);

    const started = performance.now();
    expect(await listed(store)).toEqual({ code: "persistence_failure" });
    // the two dead connections, then one connect, refused: nothing tried again after that
    expect(performance.now() - started).toBeLessThan(5_000);
    expect(proxy.accepted - accepted).toBe(1);
    expect(store.poolStats().reads).toEqual({ total: 0, idle: 0, waiting: 0 });

    proxy.refuseNew(false);
    expect(await listed(store)).toEqual(["s1"]);
  }, 30_000);

  it("lets a forwarding host read the reply to its call though its idle connections died while the call ran", async () => {
    const url = new URL(pgUrl!);
    const proxy = await startTcpProxy(Number(url.port || 5432));
    cleanups.push(() => proxy.stop());
    url.hostname = "127.0.0.1";
    url.port = String(proxy.port);
    const schema = `inbox_idle_lost_${randomBytes(4).toString("hex")}`;
    cleanups.push(() => dropSchema(pgUrl!, schema));
    // `b`, straight to the database, serves `host-b`; `a` sends through the proxy
    const b = await PgCallInbox.open(pgUrl!, { schema, pollMs: NO_POLL });
    cleanups.push(() => b.close());
    const a = await PgCallInbox.open(url.toString(), { schema, pollMs: NO_POLL, queryCheckMs: 300 });
    cleanups.push(() => a.close());
    let cut = 0;
    b.serve("host-b", async () => {
      // the sender's pooled connection, idle since it recorded the call, dies unseen
      cut = proxy.cutAllUnnoticed(pooled);
      return { status: "ok", result: "served" };
    });

    expect(await a.send("host-b", call("s1"), 600_000)).toEqual({ status: "ok", result: "served" });
    expect(cut).toBeGreaterThanOrEqual(1);
    expect(a.poolStats()).toMatchObject({ total: 1 });
  }, 30_000);
});
