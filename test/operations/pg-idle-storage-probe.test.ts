import { randomBytes } from "node:crypto";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { storeReadyCheck } from "../../src/operations/store-ready-check.js";
import { PostgresSessionStore } from "../../src/store/postgres/postgres-store.js";
import { dropSchema, pgUrl } from "../store/contract/backends.js";
import { backendPid, blockedBy } from "../store/postgres/held-writes.js";
import { cleanupsAfterEach } from "../support/cleanups.js";

/**
 * What the readiness check of a PostgreSQL host costs while nobody writes: a storage probe per
 * check at most, none while writes commit, and never a second one queued behind the first.
 * Counted in the store's committed transactions (a probe is one).
 */

const cleanups = cleanupsAfterEach();

async function openStore(): Promise<{ store: PostgresSessionStore; schema: string }> {
  const schema = `idle_probe_${randomBytes(6).toString("hex")}`;
  const store = await PostgresSessionStore.open(pgUrl!, { schema, maxConnections: 2 });
  cleanups.push(() => dropSchema(pgUrl!, schema));
  cleanups.push(() => store.close());
  return { store, schema };
}

describe.skipIf(!pgUrl)("the readiness check of an idle PostgreSQL host", () => {
  it("probes storage on a check when nothing committed since the one before, and not while writes commit", async () => {
    const { store } = await openStore();
    const check = storeReadyCheck(store, () => undefined, { idleProbeWaitMs: 10_000 });
    const transactions = () => store.stats().transactions;
    const start = transactions();
    await check(); // the first check only counts
    expect(transactions()).toBe(start);
    await check(); // nothing committed since: one probe
    expect(transactions()).toBe(start + 1);
    await check(); // only the probe committed since the check that ran it: one more
    expect(transactions()).toBe(start + 2);
    await store.create({ sessionId: "s", owner: "o", model: "m" });
    await check(); // a write committed since: no probe
    expect(transactions()).toBe(start + 3);
  });

  it("passes a check whose probe waits behind the host's own write, and queues no second probe", async () => {
    const { store, schema } = await openStore();
    await store.create({ sessionId: "busy", owner: "o", model: "m" });
    const check = storeReadyCheck(store, () => undefined, { idleProbeWaitMs: 200 });
    await check();
    const locker = new pg.Client({ connectionString: pgUrl! });
    const watcher = new pg.Client({ connectionString: pgUrl! });
    await Promise.all([locker.connect(), watcher.connect()]);
    cleanups.push(() => watcher.end());
    cleanups.push(() => locker.end());
    // another connection holds the session's row: the host's append, and what queues behind it, waits
    await locker.query(`SET search_path = "${schema}"`);
    await locker.query("BEGIN");
    await locker.query("SELECT 1 FROM projections WHERE session_id = 'busy' FOR UPDATE");
    const append = store.append("busy", [{ type: "session/renamed", data: { title: "t" } }]);
    const pid = await backendPid(locker);
    await expect.poll(async () => (await blockedBy(watcher, pid)).direct, { timeout: 10_000 }).toBe(1);
    const before = store.stats().transactions;

    await check(); // its probe is queued: the check passes after its wait
    await check(); // the same probe still queued: no second one
    await locker.query("COMMIT");
    expect((await append).status).toBe("appended");
    // the append and one probe, whenever that one commits
    await expect.poll(() => store.stats().transactions, { timeout: 10_000 }).toBe(before + 2);
    await check(); // the probe committed since: no probe
    expect(store.stats().transactions).toBe(before + 2);
  });
});
