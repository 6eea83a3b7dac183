import pg from "pg";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { ForwardedCall, ForwardReply } from "../../../src/store/call-inbox.js";
import { gate } from "../../support/gate.js";
import { pgUrl } from "../contract/backends.js";
import { call, heldHandler, inboxFixture, NO_POLL } from "./call-inbox-rows.js";

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

  it("answers a call whose body does not decode internal_error, and holds nothing for it after", async () => {
    inbox.fresh();
    const a = await inbox.open({ pollMs: NO_POLL });
    const b = await inbox.open({ pollMs: NO_POLL, maxServing: 1 });
    const broken = a.send("host-b", call("s1", { n: 1 }), LONG);
    await expect.poll(() => inbox.rowCount(), { timeout: 20_000 }).toBe(1);
    // 0xc1 is no MessagePack type: the body cannot be read
    await inbox.sql("UPDATE forwarded_calls SET body = '\\xc1'::bytea");
    b.serve("host-b", async (c) => ({ status: "ok", result: c.params }));
    expect(await broken).toMatchObject({ status: "error", code: "internal_error" });
    // the one call it may hold is free again
    expect(await a.send("host-b", call("s2", { n: 2 }), LONG)).toEqual({ status: "ok", result: { n: 2 } });
  });

  it("takes back a call claimed behind an earlier call of its session and not begun at the longest wait: not_begun, and its target runs nothing for it", async () => {
    inbox.fresh();
    // claimed, a call is waited on past its forward wait while its target holds the session, up to
    // claimedWaitMs
    const a = await inbox.open({ pollMs: NO_POLL, claimedWaitMs: 1_000 });
    const b = await inbox.open({ pollMs: NO_POLL });
    const { started, release, ran, handler } = heldHandler();
    b.serve("host-b", handler);
    const first = a.send("host-b", call("s1", { n: 1 }), LONG);
    await started.promise;
    // claimed behind the first, which holds the session's chain past the longest wait for this one
    const secondCall = call("s1", { n: 2 });
    const second = await a.send("host-b", secondCall, 500);
    // its row deleted while not begun: it never runs, which its caller is told (before: unknown)
    expect(second).toEqual({ status: "not_begun" });
    expect(await inbox.callIds()).not.toContain(secondCall.callId);
    release.open();
    expect(await first).toEqual({ status: "ok", result: { n: 1 } });
    // a third call of the session runs after the second's turn came and went
    expect(await a.send("host-b", call("s1", { n: 3 }), LONG)).toEqual({ status: "ok", result: { n: 3 } });
    expect(ran).toEqual([{ n: 1 }, { n: 3 }]);
  });
});

/** A call of `principal` for its own session, carrying `size` bytes of params. */
function sized(sessionId: string, n: number, size: number, principal = "alice"): ForwardedCall {
  return { ...call(sessionId, { n, pad: "x".repeat(size) }), principal: { name: principal, admin: false } };
}

const KB = 1_000;

describe.skipIf(!pgUrl)("PostgreSQL call inbox: the bytes a host holds, and each principal's share", () => {
  const inbox = inboxFixture("inbox_bytes");
  afterEach(() => vi.restoreAllMocks());

  it("holds at most maxServingBytes of claimed calls; the rest wait unclaimed and are all answered as those settle", async () => {
    inbox.fresh();
    const a = await inbox.open({ pollMs: NO_POLL });
    const b = await inbox.open({ pollMs: NO_POLL, maxServingBytes: 250 * KB });
    const release = gate();
    let holding = 0;
    let most = 0;
    b.serve("host-b", async (c) => {
      holding += (c.params as { pad: string }).pad.length;
      most = Math.max(most, holding);
      await release.promise;
      holding -= (c.params as { pad: string }).pad.length;
      return { status: "ok", result: (c.params as { n: number }).n };
    });
    // ten sessions of one 100 kB call each: only the byte bound holds them back
    const outcomes = Array.from({ length: 10 }, (_, n) =>
      a.send("host-b", sized(`s${n}`, n, 100 * KB), LONG),
    );
    await expect.poll(() => inbox.rowCount(), { timeout: 20_000 }).toBe(10);
    const unclaimed = async () =>
      (await inbox.sql("SELECT 1 FROM forwarded_calls WHERE claimed_at IS NULL")).length;
    await expect.poll(unclaimed, { timeout: 20_000 }).toBe(8);
    // heard of again: still no room
    await a.send("host-b", sized("s10", 10, 1), 1);
    expect(await unclaimed()).toBe(8);
    expect(most).toBe(200 * KB);
    release.open();
    const answered = await Promise.all(outcomes);
    expect(answered).toEqual(Array.from({ length: 10 }, (_, n) => ({ status: "ok", result: n })));
    expect(most).toBe(200 * KB);
  });

  it("claims a call larger than maxServingBytes alone, once it holds nothing else: none starves", async () => {
    inbox.fresh();
    const a = await inbox.open({ pollMs: NO_POLL });
    const b = await inbox.open({ pollMs: NO_POLL, maxServingBytes: 50 * KB });
    const releases: (() => void)[] = [];
    b.serve(
      "host-b",
      (c) =>
        new Promise<ForwardReply>((resolve) =>
          releases.push(() => resolve({ status: "ok", result: (c.params as { n: number }).n })),
        ),
    );
    const outcomes = Array.from({ length: 3 }, (_, n) => a.send("host-b", sized(`s${n}`, n, 100 * KB), LONG));
    for (let n = 0; n < 3; n++) {
      await expect.poll(() => releases.length, { timeout: 20_000 }).toBe(n + 1);
      // every send recorded (the first may be claimed before the others are written)
      await expect
        .poll(async () => (await inbox.sql("SELECT 1 FROM forwarded_calls")).length, { timeout: 20_000 })
        .toBe(3 - n);
      // one at a time: the others stay unclaimed
      const unclaimed = await inbox.sql("SELECT 1 FROM forwarded_calls WHERE claimed_at IS NULL");
      expect(unclaimed).toHaveLength(2 - n);
      releases[n]?.();
    }
    expect(await Promise.all(outcomes)).toEqual([0, 1, 2].map((n) => ({ status: "ok", result: n })));
  });

  it("reads at most maxReplyBytes of replies at once; the rest wait in the table and are all delivered", async () => {
    inbox.fresh();
    const a = await inbox.open({ pollMs: NO_POLL, maxReplyBytes: 250 * KB });
    const b = await inbox.open({ pollMs: NO_POLL });
    const answer = gate();
    b.serve("host-b", async (c) => {
      await answer.promise;
      return { status: "ok", result: "y".repeat(100 * KB + (c.params as { n: number }).n) };
    });
    // every reply read here is held until the test lets reads go on
    const reads = gate();
    let held = 0;
    let most = 0;
    const query = pg.Pool.prototype.query as (...args: unknown[]) => Promise<pg.QueryResult>;
    vi.spyOn(pg.Pool.prototype, "query").mockImplementation(function (this: pg.Pool, ...args: unknown[]) {
      const run = query.apply(this, args);
      if (typeof args[0] !== "string" || !args[0].includes("RETURNING reply")) return run;
      return run.then(async (result) => {
        const size = (result.rows[0]?.reply as Buffer | undefined)?.length ?? 0;
        held += size;
        most = Math.max(most, held);
        await reads.promise;
        held -= size;
        return result;
      });
    } as typeof pg.Pool.prototype.query);
    const outcomes = Array.from({ length: 10 }, (_, n) => a.send("host-b", call(`s${n}`, { n }), LONG));
    await expect.poll(() => inbox.rowCount(), { timeout: 20_000 }).toBe(10);
    answer.open();
    const waiting = async () =>
      (await inbox.sql("SELECT 1 FROM forwarded_calls WHERE reply IS NOT NULL")).length;
    // two replies read (and held), eight answered and waiting in the table for room
    await expect.poll(() => held, { timeout: 20_000 }).toBeGreaterThan(200 * KB);
    await expect.poll(waiting, { timeout: 20_000 }).toBe(8);
    // the senders woken meanwhile wait for room rather than read
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(await waiting()).toBe(8);
    expect(most).toBeLessThanOrEqual(250 * KB);
    reads.open();
    const delivered = await Promise.all(outcomes);
    expect(delivered.map((o) => o.status === "ok" && (o.result as string).length)).toEqual(
      Array.from({ length: 10 }, (_, n) => 100 * KB + n),
    );
    expect(most).toBeLessThanOrEqual(250 * KB);
  });

  it("refuses a call past maxPendingBytes of the calls it waits on overloaded, recording nothing; one larger goes alone", async () => {
    inbox.fresh();
    const a = await inbox.open({ pollMs: NO_POLL, maxPendingBytes: 250 * KB });
    const b = await inbox.open({ pollMs: NO_POLL });
    const release = gate();
    const large = gate();
    b.serve("host-b", async (c) => {
      const { n } = c.params as { n: number };
      if (n < 2) await release.promise;
      if (n === 4) await large.promise;
      return { status: "ok", result: n };
    });
    try {
      // two 100 kB calls waiting on their replies: a third does not fit beside them
      const waiting = [0, 1].map((n) => a.send("host-b", sized(`s${n}`, n, 100 * KB), LONG));
      await expect.poll(() => inbox.rowCount(), { timeout: 20_000 }).toBe(2);
      // a short wait: a call forwarded rather than refused times out, and fails the test at once
      await expect(a.send("host-b", sized("s2", 2, 100 * KB), 1_000)).rejects.toMatchObject({
        code: "overloaded",
        data: { limit: "pending_call_bytes", max: 250 * KB },
      });
      expect(await inbox.rowCount()).toBe(2);
      // a small one still fits
      expect(await a.send("host-b", sized("s3", 3, 1), LONG)).toEqual({ status: "ok", result: 3 });
      release.open();
      expect(await Promise.all(waiting)).toEqual([0, 1].map((n) => ({ status: "ok", result: n })));
      // their bytes given back: a call larger than the whole bound goes, alone
      const alone = a.send("host-b", sized("s4", 4, 300 * KB), LONG);
      await expect.poll(() => inbox.rowCount(), { timeout: 20_000 }).toBe(1);
      await expect(a.send("host-b", sized("s5", 5, 1), 1_000)).rejects.toMatchObject({
        data: { limit: "pending_call_bytes" },
      });
      large.open();
      expect(await alone).toEqual({ status: "ok", result: 4 });
      expect(await a.send("host-b", sized("s6", 6, 1), LONG)).toEqual({ status: "ok", result: 6 });
    } finally {
      // a failed expectation leaves no handler waiting: the inboxes close, the schema is dropped
      release.open();
      large.open();
    }
  });

  it("refuses a principal past its share of maxPending overloaded, while another principal's call goes through", async () => {
    inbox.fresh();
    const a = await inbox.open({ pollMs: NO_POLL, maxPending: 4, maxPendingPerPrincipal: 2 });
    const b = await inbox.open({ pollMs: NO_POLL });
    const release = gate();
    b.serve("host-b", async (c) => {
      if (c.principal.name === "mallory") await release.promise;
      return { status: "ok", result: c.principal.name };
    });
    const flood = [0, 1].map((n) => a.send("host-b", sized(`m${n}`, n, 1, "mallory"), LONG));
    await expect.poll(() => inbox.rowCount(), { timeout: 20_000 }).toBe(2);
    // a short wait: a call forwarded rather than refused times out, and fails the test at once
    await expect(a.send("host-b", sized("m2", 2, 1, "mallory"), 1_000)).rejects.toMatchObject({
      code: "overloaded",
      data: { limit: "pending_calls_per_principal", max: 2 },
    });
    // mallory's calls still wait: alice's is answered all the same
    expect(await a.send("host-b", sized("a0", 0, 1, "alice"), LONG)).toEqual({
      status: "ok",
      result: "alice",
    });
    release.open();
    expect(await Promise.all(flood)).toEqual([0, 1].map(() => ({ status: "ok", result: "mallory" })));
    // its calls answered, mallory has its share back
    expect(await a.send("host-b", sized("m3", 3, 1, "mallory"), LONG)).toEqual({
      status: "ok",
      result: "mallory",
    });
  });
});
