import pg from "pg";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { RenewOutcome } from "../../../src/store/session-lease.js";
import { pgUrl } from "../contract/backends.js";
import { delta, userMessage } from "../open-store.js";
import { backendPid, blockedBy, holdWrites } from "./held-writes.js";
import { keptWayOnly, sentStatements } from "./pg-client-spies.js";
import { twoHostsWithSession } from "./two-hosts.js";

const S = "s";
const LONG = 60_000;

/** Two hosts on one fresh schema with session S, closed and the schema dropped after the test. */
const twoHosts = twoHostsWithSession("lease", S);

afterEach(() => {
  vi.restoreAllMocks();
});

/** The statements that read a lease row on their own (not with the session's lock). */
const leaseReads = (sent: readonly string[]) =>
  sent.filter(
    (text) => text.includes("JOIN leases l ON l.session_id = $1") || text.includes("FROM leases WHERE"),
  );

describe.skipIf(!pgUrl)("leases on PostgreSQL", () => {
  it("a take waits for a renewal in flight and finds the lease held, though it had expired when the take began", async () => {
    const { a, b, schema } = await twoHosts();
    const mine = await a.acquireLease(S, "host-a", 2_000);
    if (mine.status !== "acquired") throw new Error(mine.status);
    // A's renewal has written the lease row and not committed it: its transaction waits in a trigger
    const held = await holdWrites(schema, "leases", "UPDATE");
    try {
      await held.hold();
      const renewal = a.renewLeases("host-a", [mine.lease], LONG);
      await held.waitFor("held");
      // the lease as committed expires meanwhile, by the database clock
      await expect.poll(() => b.leaseHolder(S), { timeout: 10_000, interval: 50 }).toBeNull();
      const taken = b.acquireLease(S, "host-b", LONG);
      await held.waitFor("behind");
      await held.release();
      expect(await renewal).toEqual({ renewed: [mine.lease], lost: [] });
      expect(await taken).toMatchObject({ status: "held", holder: { hostId: "host-a", generation: 1 } });
      expect(await b.leaseHolder(S)).toMatchObject({ hostId: "host-a", generation: 1 });
      expect((await a.append(S, [delta("t", "still mine")], { fence: mine.lease })).status).toBe("appended");
    } finally {
      await held.release();
      await held.end();
    }
  });

  it("a renewal completes while the host's append batch waits on a row lock, and moves the expiry", async () => {
    const { a, b, schema } = await twoHosts();
    await a.create({ sessionId: "busy", owner: "alice", model: "m" });
    const mine = await a.acquireLease(S, "host-a", LONG);
    if (mine.status !== "acquired") throw new Error(mine.status);
    const before = (await b.leaseHolder(S))!.expiresAt;
    const locker = new pg.Client({ connectionString: pgUrl! });
    const watcher = new pg.Client({ connectionString: pgUrl! });
    await Promise.all([locker.connect(), watcher.connect()]);
    try {
      // another connection holds the busy session's row: A's append batch waits for it
      await locker.query(`SET search_path = "${schema}"`);
      await locker.query("BEGIN");
      await locker.query("SELECT 1 FROM projections WHERE session_id = 'busy' FOR UPDATE");
      let appended = false;
      const append = a.append("busy", [userMessage("stuck")]).then((outcome) => {
        appended = true;
        return outcome;
      });
      const pid = await backendPid(locker);
      await expect.poll(async () => (await blockedBy(watcher, pid)).direct, { timeout: 10_000 }).toBe(1);

      let renewed: RenewOutcome | undefined;
      const renewal = a.renewLeases("host-a", [mine.lease], 2 * LONG).then((outcome) => {
        renewed = outcome;
      });
      await expect
        .poll(() => renewed, { timeout: 10_000, interval: 20 })
        .toEqual({ renewed: [mine.lease], lost: [] });
      await renewal;
      expect((await b.leaseHolder(S))!.expiresAt).toBeGreaterThan(before);
      expect(appended).toBe(false);

      await locker.query("COMMIT");
      expect((await append).status).toBe("appended");
    } finally {
      await locker.end();
      await watcher.end();
    }
  });

  it("an append fenced the usual way reads the lease with the session's lock, in no statement of its own", async () => {
    const { a, b } = await twoHosts();
    const mine = await a.acquireLease(S, "host-a", LONG);
    if (mine.status !== "acquired") throw new Error(mine.status);
    const sent = sentStatements();
    // B kept no state of S: its first append reads the session (and its lease) under the lock
    expect((await b.append(S, [userMessage("hi")], { fence: mine.lease })).status).toBe("appended");
    expect(sent.filter((text) => text.includes("FOR UPDATE")).length).toBeGreaterThan(0);
    expect(leaseReads(sent)).toEqual([]);
    const stale = { ...mine.lease, generation: 0 };
    expect(await b.append(S, [userMessage("stale")], { fence: stale })).toEqual({ status: "fenced" });
  });

  it("an append fenced on a kept state goes the one-round-trip way, the fence checked by the database", async () => {
    const { a } = await twoHosts();
    const mine = await a.acquireLease(S, "host-a", LONG);
    if (mine.status !== "acquired") throw new Error(mine.status);
    expect((await a.append(S, [delta("t", "one")], { fence: mine.lease })).status).toBe("appended");
    const sent = sentStatements();
    expect(await a.append(S, [delta("t", "two")], { fence: mine.lease })).toMatchObject({
      status: "appended",
      events: [{ seq: 3 }],
    });
    keptWayOnly(sent);
    expect(leaseReads(sent)).toEqual([]);
  });
});
