import { describe, expect, it } from "vitest";
import { pgUploadSweeper } from "../../../src/operations/pg-upload-sweeper.js";
import { PgCallInbox } from "../../../src/store/postgres/pg-call-inbox.js";
import { PostgresSessionStore } from "../../../src/store/postgres/postgres-store.js";
import type { PoolStats } from "../../../src/store/store-metrics.js";
import { UPLOAD_MIN_COUNTED_BYTES } from "../../../src/store/upload-counted-bytes.js";
import { cleanupsAfterEach } from "../../support/cleanups.js";
import { settlement } from "../../support/settlement.js";
import { pgUrl } from "../contract/backends.js";
import { call, heldHandler, NO_POLL } from "./call-inbox-rows.js";
import { lockTable, waitingOn } from "./held-writes.js";
import { hostConnections, type ScratchDatabase, scratchDatabase } from "./scratch-database.js";

/**
 * A pool of one connection, held by a statement waiting on a table lock, and a second operation
 * waiting for that connection when its owner (the call inbox, the store, the uploads sweeper)
 * closes: pg's pool keeps such a connect waiting for ever once it ended. The second one settles
 * as closing settles it, the close ends once the lock goes, and no connection is left. Each test
 * has a database of its own, so its connections are counted apart from other tests'.
 */

const cleanups = cleanupsAfterEach();
const metrics = { committed: () => undefined };
/** Far longer than a settling takes; a connect left waiting never settles within it. */
const BOUND_MS = 10_000;
const LONG = 600_000;

async function newDatabase(): Promise<ScratchDatabase> {
  const scratch = await scratchDatabase(pgUrl!, "smx_waiting");
  cleanups.push(() => scratch.drop());
  return scratch;
}

/**
 * Locks `table` of the scratch database's public schema, starts `holder` (whose statement then
 * waits on the lock, on the pool's one connection) and `waiter` (which waits for that connection),
 * and then the owner's close. Returns how each settles, and the lock's end.
 */
async function heldAtClose<A, B>(
  scratch: ScratchDatabase,
  table: string,
  stats: () => PoolStats,
  holder: () => Promise<A>,
  waiter: () => Promise<B>,
  close: () => Promise<void>,
) {
  const { admin, pid } = await lockTable(cleanups, "public", table, scratch.url);
  const held = settlement(holder());
  // asked on a connection outside the lock's transaction, which reads pg_stat_activity once
  await expect.poll(async () => (await waitingOn(scratch.server, pid)).length, { timeout: BOUND_MS }).toBe(1);
  const waiting = settlement(waiter());
  await expect.poll(() => stats().waiting, { timeout: BOUND_MS }).toBe(1);
  const closed = settlement(close());
  return { held, waiting, closed, unlock: () => admin.query("ROLLBACK") };
}

describe.skipIf(!pgUrl)("closing a PostgreSQL pool's owner while a connect waits on it", () => {
  it("a forwarded call waiting for the inbox's connection resolves timeout at once, though the close waits for a call the inbox runs", async () => {
    const scratch = await newDatabase();
    const inbox = await PgCallInbox.open(scratch.url, { maxConnections: 1, pollMs: NO_POLL });
    // a call this inbox serves itself, held running: the close waits for it (and its reply)
    const { started, release, handler } = heldHandler();
    inbox.serve("host-b", handler);
    const running = settlement(inbox.send("host-b", call("s0"), LONG));
    await started.promise;

    const { held, waiting, closed, unlock } = await heldAtClose(
      scratch,
      "forwarded_calls",
      () => inbox.poolStats(),
      () => inbox.send("host-b", call("s1"), LONG),
      () => inbox.send("host-b", call("s2"), LONG),
      () => inbox.close(),
    );
    await expect.poll(waiting, { timeout: BOUND_MS }).toEqual({ value: { status: "timeout" } });
    // claimed and running: the close's take-back (which waits for the pool's one connection, past
    // its bound) would not find it unclaimed anyway
    await expect.poll(running, { timeout: BOUND_MS }).toEqual({ value: { status: "unknown" } });
    // refused, the send's connect waits on the pool no more, though the pool is still open
    expect(inbox.poolStats().waiting).toBe(0);
    expect(closed()).toBeUndefined();

    release.open();
    await unlock();
    await expect.poll(closed, { timeout: BOUND_MS }).toEqual({ value: undefined });
    // its INSERT sent before the close: recorded once the lock went, and its target may run it
    expect(held()).toEqual({ value: { status: "unknown" } });
    await expect.poll(() => hostConnections(scratch), { timeout: BOUND_MS }).toBe(0);
  }, 60_000);

  it("a store read waiting for a pooled connection rejects host_shutting_down", async () => {
    const scratch = await newDatabase();
    const store = await PostgresSessionStore.open(scratch.url, { maxConnections: 1, metrics });
    await store.create({ sessionId: "s1", owner: "alice", model: "m" });

    const { held, waiting, closed, unlock } = await heldAtClose(
      scratch,
      "events",
      () => store.poolStats().reads,
      () => store.readAfter("s1", 0, 10),
      () => store.header("s1"),
      () => store.close(),
    );
    await expect
      .poll(waiting, { timeout: BOUND_MS })
      .toEqual({ error: expect.objectContaining({ code: "host_shutting_down", retryable: true }) });

    await unlock();
    await expect.poll(closed, { timeout: BOUND_MS }).toEqual({ value: undefined });
    // the read holding the connection had it to the end
    expect(held()).toMatchObject({ value: { status: "ok" } });
    await expect.poll(() => hostConnections(scratch), { timeout: BOUND_MS }).toBe(0);
  }, 60_000);

  it("an upload's quota read waiting for the sweeper's connection rejects host_shutting_down", async () => {
    const scratch = await newDatabase();
    const store = await PostgresSessionStore.open(scratch.url, { metrics });
    await store.putAttachment({ owner: "alice", name: "f", type: "t", bytes: new Uint8Array(10) });
    await store.close();
    const sweeper = pgUploadSweeper(scratch.url, "public");

    const { held, waiting, closed, unlock } = await heldAtClose(
      scratch,
      "attachments",
      () => sweeper.poolStats(),
      () => sweeper.pendingBytes("alice"),
      () => sweeper.pendingBytes("bob"),
      () => sweeper.close(),
    );
    await expect
      .poll(waiting, { timeout: BOUND_MS })
      .toEqual({ error: expect.objectContaining({ code: "host_shutting_down", retryable: true }) });

    await unlock();
    await expect.poll(closed, { timeout: BOUND_MS }).toEqual({ value: undefined });
    // a 10-byte upload counts as the least any upload does
    expect(held()).toEqual({ value: UPLOAD_MIN_COUNTED_BYTES });
    await expect.poll(() => hostConnections(scratch), { timeout: BOUND_MS }).toBe(0);
  }, 60_000);
});
