import { afterEach, describe, expect, it } from "vitest";
import { openTempStore, turnStart } from "./open-store.js";

/**
 * SQLite judges leases by the store's clock (`now`), so the instant a lease expires can be hit
 * exactly; PostgreSQL uses the database's clock, which a test cannot stop.
 */
let env: ReturnType<typeof openTempStore> | undefined;
afterEach(async () => {
  await env?.dispose();
  env = undefined;
});

describe("a lease at the instant it expires", () => {
  it("is held one millisecond before and free at its expiry, by every lease read and write", async () => {
    let clock = 1_000;
    env = openTempStore({ now: () => clock });
    const { store } = env;
    await store.create({ sessionId: "s", owner: "alice", model: "m" });
    const taken = await store.acquireLease("s", "host-a", 500);
    if (taken.status !== "acquired") throw new Error(taken.status);
    expect(taken.expiresAt).toBe(1_500);

    clock = 1_499;
    expect(await store.leaseHolder("s")).toEqual({ ...taken.lease, expiresAt: 1_500 });
    expect((await store.leasePage(null, 10)).leases.map((l) => l.sessionId)).toEqual(["s"]);
    expect(await store.acquireLease("s", "host-b", 500)).toMatchObject({
      status: "held",
      holder: { hostId: "host-a" },
    });

    clock = 1_500;
    expect(await store.leaseHolder("s")).toBeNull();
    expect(await store.leasePage(null, 10)).toEqual({ leases: [], next: null });
    expect(await store.renewLeases("host-a", [taken.lease], 500)).toEqual({
      renewed: [],
      lost: [taken.lease],
    });
    expect(await store.acquireLease("s", "host-b", 500)).toMatchObject({
      status: "acquired",
      lease: { hostId: "host-b", generation: 2 },
      expiresAt: 2_000,
      takeover: { fromHost: "host-a", interruptedTurnId: null },
    });
  });

  it("spares an open turn from interruptOpenTurns one millisecond before its lease expires, not at its expiry", async () => {
    let clock = 1_000;
    env = openTempStore({ now: () => clock });
    const { store } = env;
    await store.create({ sessionId: "s", owner: "alice", model: "m" });
    await store.append("s", [turnStart("t")]);
    expect(await store.acquireLease("s", "host-a", 500)).toMatchObject({ expiresAt: 1_500 });

    clock = 1_499;
    expect(await store.interruptOpenTurns(clock, { hostId: "host-b" })).toEqual([]);
    clock = 1_500;
    expect(await store.interruptOpenTurns(clock, { hostId: "host-b" })).toEqual(["s"]);
    expect((await store.projection("s"))?.openTurnId).toBeNull();
  });
});
