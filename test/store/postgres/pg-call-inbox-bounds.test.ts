import { describe, expect, it } from "vitest";
import { gate } from "../../support/gate.js";
import { pgUrl } from "../contract/backends.js";
import { call, inboxFixture, NO_POLL } from "./call-inbox-rows.js";

/** Longer than any test: a sender that missed its wake-up waits out the test, not its own timeout. */
const LONG = 600_000;

describe.skipIf(!pgUrl)("PostgreSQL call inbox: what a host serving other hosts' calls holds", () => {
  const inbox = inboxFixture("inbox_bounds");

  it("holds at most maxServing calls claimed at once; the rest wait unclaimed and are served as those settle", async () => {
    inbox.fresh();
    const a = await inbox.open({ pollMs: NO_POLL });
    const b = await inbox.open({ pollMs: NO_POLL, maxServing: 4 });
    const release = gate();
    const started: unknown[] = [];
    b.serve("host-b", async (c) => {
      started.push(c.params);
      await release.promise;
      return { status: "ok", result: c.params };
    });
    // ten sessions, so no call waits behind another of its session: only the bound holds them back
    const outcomes = Array.from({ length: 10 }, (_, n) => a.send("host-b", call(`s${n}`, { n }), LONG));
    await expect.poll(() => started.length, { timeout: 20_000 }).toBe(4);
    await expect.poll(() => inbox.rowCount(), { timeout: 20_000 }).toBe(10);
    const unclaimed = async () =>
      (await inbox.sql("SELECT 1 FROM forwarded_calls WHERE claimed_at IS NULL")).length;
    expect(await unclaimed()).toBe(6);
    // heard of again: still no room
    await a.send("host-b", call("s10", { n: 10 }), 1);
    expect(started).toHaveLength(4);
    release.open();
    const answered = await Promise.all(outcomes);
    expect(
      answered.map((o) => o.status === "ok" && (o.result as { n: number }).n).sort((x, y) => +x - +y),
    ).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(started).toHaveLength(10);
  });

  it("drops a call whose sender gave up while it waited behind an earlier call of its session, running nothing for it", async () => {
    inbox.fresh();
    const a = await inbox.open({ pollMs: NO_POLL });
    const b = await inbox.open({ pollMs: NO_POLL });
    const started = gate();
    const release = gate();
    const ran: unknown[] = [];
    b.serve("host-b", async (c) => {
      ran.push(c.params);
      started.open();
      await release.promise;
      return { status: "ok", result: c.params };
    });
    const first = a.send("host-b", call("s1", { n: 1 }), LONG);
    await started.promise;
    // claimed behind the first, which holds the session's chain past this one's timeout
    const second = await a.send("host-b", call("s1", { n: 2 }), 1_000);
    expect(second).toEqual({ status: "timeout" });
    release.open();
    expect(await first).toEqual({ status: "ok", result: { n: 1 } });
    // a third call of the session runs after the second's turn came and went
    expect(await a.send("host-b", call("s1", { n: 3 }), LONG)).toEqual({ status: "ok", result: { n: 3 } });
    expect(ran).toEqual([{ n: 1 }, { n: 3 }]);
  });
});
