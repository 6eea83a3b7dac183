import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";
import { describe, expect, it, vi } from "vitest";
import { SessionmuxError } from "../../../protocol/index.js";
import type { ForwardOutcome, ForwardReply } from "../../../src/store/call-inbox.js";
import { PgCallInbox } from "../../../src/store/postgres/pg-call-inbox.js";
import { gate } from "../../support/gate.js";
import { pgUrl } from "../contract/backends.js";
import {
  call,
  channelListener,
  heldHandler,
  holdNextClaim,
  inboxFixture,
  NO_POLL,
} from "./call-inbox-rows.js";
import { scratchDatabase } from "./scratch-database.js";

/** Longer than any test: a sender that missed its wake-up waits out the test, not its own timeout. */
const LONG = 600_000;
/** A forward wait the test outlives: a call still running past it is waited on. */
const FORWARD_WAIT = 1_000;

describe.skipIf(!pgUrl)("PostgreSQL call inbox: serving, stopping and closing", () => {
  const inbox = inboxFixture("inbox_life");

  /**
   * Fresh inboxes `a` and `b`, and a's two calls of session s1, both claimed by b, whose handler
   * runs the first and holds it until `release` opens (`ran`: the params it ran with; `stop`: the
   * end of its serving). `closedByTest`: b is left to the test to close.
   */
  async function twoClaimedOnB(closedByTest: boolean) {
    inbox.fresh();
    const a = await inbox.open({ pollMs: NO_POLL });
    const b = await inbox.open({ pollMs: NO_POLL });
    if (closedByTest) inbox.forget(b);
    const { started, release, ran, handler } = heldHandler();
    // both recorded before b serves: one claim takes both, the second waits behind the first
    const first = a.send("host-b", call("s1", { n: 1 }), LONG);
    await expect.poll(() => inbox.rowCount(), { timeout: 20_000 }).toBe(1);
    const second = a.send("host-b", call("s1", { n: 2 }), LONG);
    await expect.poll(() => inbox.rowCount(), { timeout: 20_000 }).toBe(2);
    const stop = b.serve("host-b", handler);
    await started.promise;
    await expect
      .poll(async () => (await inbox.sql("SELECT 1 FROM forwarded_calls WHERE claimed_at IS NULL")).length, {
        timeout: 20_000,
      })
      .toBe(0);
    return { b, stop, release, ran, first, second };
  }

  /**
   * Fresh inboxes `a` and `b` (b left to the test to close), b serving host-b with a handler that
   * holds its call until `release` opens, and a's call `s1` running there (`sent`: its outcome).
   */
  async function runningOnB(result: string) {
    inbox.fresh();
    const a = await inbox.open({ pollMs: NO_POLL });
    const b = await inbox.open({ pollMs: NO_POLL });
    inbox.forget(b);
    const started = gate();
    const release = gate();
    b.serve("host-b", async () => {
      started.open();
      await release.promise;
      return { status: "ok", result };
    });
    const sent = a.send("host-b", call("s1"), LONG);
    await started.promise;
    return { a, b, release, sent };
  }

  it("a closed inbox refuses to send, host_shutting_down", async () => {
    inbox.fresh();
    const a = await inbox.open();
    inbox.forget(a);
    await a.close();
    await expect(a.send("host-b", call("s1"), LONG)).rejects.toMatchObject({
      code: "host_shutting_down",
      message: "the host is shutting down; reconnect shortly",
    });
    expect(await inbox.rowCount()).toBe(0);
  });

  it("a host that closes finishes the call it runs and delivers its reply before its connections end", async () => {
    const { b, release, sent } = await runningOnB("finished");
    let closed = false;
    const closing = b.close().then(() => {
      closed = true;
    });
    // close waits for the running call (the reply is written on b's pool)
    await expect.poll(() => inbox.rowCount(), { timeout: 20_000 }).toBe(1);
    expect(closed).toBe(false);
    release.open();
    await closing;
    expect(await sent).toEqual({ status: "ok", result: "finished" });
  });

  it("a call withdrawn before its target claimed it is taken back unrun; one withdrawn once claimed is still answered when its reply comes within the grace", async () => {
    inbox.fresh();
    // a grace no test outlives: the claimed call's reply decides
    const a = await inbox.open({ pollMs: NO_POLL, claimedReplyGraceMs: LONG });
    const b = await inbox.open({ pollMs: NO_POLL });
    const unclaimed = new AbortController();
    const sent = a.send("host-b", call("s1", { n: 1 }), LONG, unclaimed.signal);
    await expect.poll(() => inbox.rowCount(), { timeout: 20_000 }).toBe(1);
    unclaimed.abort();
    expect(await sent).toEqual({ status: "withdrawn" });
    expect(await inbox.rowCount()).toBe(0);

    const { started, release, ran, handler } = heldHandler("ran");
    b.serve("host-b", handler);
    const claimed = new AbortController();
    const running = a.send("host-b", call("s1", { n: 2 }), LONG, claimed.signal);
    await started.promise;
    claimed.abort();
    // the withdrawal found the call claimed: it is still waited for, and its row kept
    await expect.poll(() => inbox.rowCount(), { timeout: 20_000 }).toBe(1);
    release.open();
    expect(await running).toEqual({ status: "ok", result: "ran" });
    // the call taken back never ran
    expect(ran).toEqual([{ n: 2 }]);
  });

  it("a call withdrawn once claimed whose reply does not come within the grace is given up, unknown, at once: a later reply is not kept", async () => {
    inbox.fresh();
    const a = await inbox.open({ pollMs: NO_POLL, claimedReplyGraceMs: 200 });
    const b = await inbox.open({ pollMs: NO_POLL });
    const { started, release, ran, handler } = heldHandler("ran late");
    b.serve("host-b", handler);
    const claimed = new AbortController();
    // a forward wait no test outlives: the outcome comes from the withdrawal
    const running = a.send("host-b", call("s1", { n: 1 }), LONG, claimed.signal);
    await started.promise;
    claimed.abort();
    expect(await running).toEqual({ status: "unknown" });
    // the row went with the answer, so the reply the target writes later finds none
    expect(await inbox.rowCount()).toBe(0);
    release.open();
    // b's close waits for the call to settle, its reply's write included
    await b.close();
    expect(await inbox.rowCount()).toBe(0);
    expect(ran).toEqual([{ n: 1 }]);
  });

  it("a call its target claimed and still runs past the forward wait is waited on, not given up: it runs once and its reply is the answer", async () => {
    inbox.fresh();
    const a = await inbox.open({ pollMs: NO_POLL });
    const b = await inbox.open({ pollMs: NO_POLL });
    const { started, release, ran, handler } = heldHandler("slow");
    b.serve("host-b", handler);
    // its target keeps the session: nothing withdraws the call
    const sent = a.send("host-b", call("s1", { n: 1 }), FORWARD_WAIT, new AbortController().signal);
    await started.promise;
    // the forward wait passes while it runs: its sender still waits, the row still there
    const early = await Promise.race([sent, sleep(2.5 * FORWARD_WAIT).then(() => "still waiting")]);
    expect(early).toBe("still waiting");
    expect(await inbox.rowCount()).toBe(1);
    release.open();
    expect(await sent).toEqual({ status: "ok", result: "slow" });
    expect(ran).toEqual([{ n: 1 }]);
    expect(await inbox.rowCount()).toBe(0);
  });

  it("a call claimed behind a slow one of its session past the forward wait still runs, once, and is answered", async () => {
    inbox.fresh();
    const a = await inbox.open({ pollMs: NO_POLL });
    const b = await inbox.open({ pollMs: NO_POLL });
    const { started, release, ran, handler } = heldHandler();
    b.serve("host-b", handler);
    const first = a.send("host-b", call("s1", { n: 1 }), LONG);
    await started.promise;
    const second = a.send("host-b", call("s1", { n: 2 }), FORWARD_WAIT, new AbortController().signal);
    await expect
      .poll(async () => (await inbox.sql("SELECT 1 FROM forwarded_calls WHERE claimed_at IS NULL")).length, {
        timeout: 20_000,
      })
      .toBe(0);
    const early = await Promise.race([second, sleep(2.5 * FORWARD_WAIT).then(() => "still waiting")]);
    expect(early).toBe("still waiting");
    release.open();
    expect(await first).toEqual({ status: "ok", result: { n: 1 } });
    expect(await second).toEqual({ status: "ok", result: { n: 2 } });
    expect(ran).toEqual([{ n: 1 }, { n: 2 }]);
  });

  it("a call claimed behind a slow one whose sender never moved its expiry on is put back unclaimed, unrun, for its sender to take back", async () => {
    inbox.fresh();
    const a = await inbox.open({ pollMs: NO_POLL });
    // b's poll claims the call recorded with no notification
    const b = await inbox.open({ pollMs: 100 });
    const { started, release, ran, handler } = heldHandler();
    b.serve("host-b", handler);
    const first = a.send("host-b", call("s1", { n: 1 }), LONG);
    await started.promise;
    // a sender that has not looked at its call since its forward wait passed
    const late = call("s1", { n: 2 });
    await inbox.record("host-b", late, 1_000);
    const state = async () =>
      (
        await inbox.sql<{ claimed: boolean; expired: boolean }>(
          "SELECT claimed_at IS NOT NULL AS claimed, expires_at <= clock_timestamp() AS expired FROM forwarded_calls WHERE call_id = $1",
          [late.callId],
        )
      )[0];
    await expect.poll(state, { timeout: 20_000 }).toEqual({ claimed: true, expired: false });
    await expect.poll(state, { timeout: 20_000 }).toEqual({ claimed: true, expired: true });
    release.open();
    expect(await first).toEqual({ status: "ok", result: { n: 1 } });
    await expect.poll(state, { timeout: 20_000 }).toEqual({ claimed: false, expired: true });
    expect(ran).toEqual([{ n: 1 }]);
  });

  it("a claimed call is waited on for claimedWaitMs at most, then given up unknown: never sent again, its late reply not kept", async () => {
    inbox.fresh();
    const a = await inbox.open({ pollMs: NO_POLL, claimedWaitMs: 800 });
    const b = await inbox.open({ pollMs: NO_POLL });
    const { started, release, ran, handler } = heldHandler("too late");
    b.serve("host-b", handler);
    const sent = a.send("host-b", call("s1", { n: 1 }), 200, new AbortController().signal);
    await started.promise;
    expect(await sent).toEqual({ status: "unknown" });
    expect(await inbox.rowCount()).toBe(0);
    release.open();
    await b.close();
    expect(await inbox.rowCount()).toBe(0);
    expect(ran).toEqual([{ n: 1 }]);
  });

  it("the longest wait on a claimed call counts from when its caller's wait began: a call routed again waits no longer in all", async () => {
    inbox.fresh();
    const a = await inbox.open({ pollMs: NO_POLL, claimedWaitMs: LONG });
    const b = await inbox.open({ pollMs: NO_POLL });
    const { started, release, ran, handler } = heldHandler();
    b.serve("host-b", handler);
    const first = a.send("host-b", call("s1", { n: 1 }), LONG);
    await started.promise;
    // its caller has waited the longest wait already (earlier routes): past this send's forward
    // wait it is not waited on for another; claimed behind the first, not begun, it is taken back
    const second = call("s1", { n: 2 });
    const outcome = await a.send("host-b", second, 200, undefined, Date.now() - LONG);
    expect(outcome).toEqual({ status: "not_begun" });
    expect(await inbox.callIds()).not.toContain(second.callId);
    release.open();
    expect(await first).toEqual({ status: "ok", result: { n: 1 } });
    expect(ran).toEqual([{ n: 1 }]);
  });

  it("a call withdrawn once claimed and not begun (its target stopped serving as it took it) is taken back at once, withdrawn, not unknown: it never ran", async () => {
    inbox.fresh();
    const a = await inbox.open({ pollMs: NO_POLL, claimedReplyGraceMs: 1_000 });
    const b = await inbox.open({ pollMs: NO_POLL });
    const stop = b.serve("host-b", async () => ({ status: "ok", result: "b" }));
    expect(await a.send("host-b", call("s1"), LONG)).toEqual({ status: "ok", result: "b" });
    // b's claim is answered by the database and held before b sees it; a's withdrawal is seen
    const claimed = gate();
    const claimGo = gate();
    const withdrawTried = gate();
    const query = pg.Pool.prototype.query as (...args: unknown[]) => Promise<pg.QueryResult>;
    vi.spyOn(pg.Pool.prototype, "query").mockImplementation(function (this: pg.Pool, ...args: unknown[]) {
      const text = typeof args[0] === "string" ? args[0] : "";
      const answer = query.apply(this, args);
      if (text.includes("SET claimed_at = clock_timestamp()")) {
        return answer.then(async (result) => {
          if (result.rows.some((r: { call_id: string | null }) => r.call_id !== null)) {
            claimed.open();
            await claimGo.promise;
          }
          return result;
        });
      }
      if (text.includes("(claimed_at IS NULL OR started IS FALSE) RETURNING call_id")) {
        return answer.then((result) => {
          withdrawTried.open();
          return result;
        });
      }
      return answer;
    } as typeof pg.Pool.prototype.query);
    try {
      const withdraw = new AbortController();
      const sent = a.send("host-b", call("s1", { n: 2 }), LONG, withdraw.signal);
      await claimed.promise;
      // the target lets the session go just then: a finds the call claimed and not begun, and
      // takes it back without waiting the grace
      withdraw.abort();
      await withdrawTried.promise;
      expect(await sent).toEqual({ status: "withdrawn" });
      expect(await inbox.rowCount()).toBe(0);
      // b, seeing its claim, puts back a call that is no longer there: nothing to run or answer
      stop();
      claimGo.open();
      await b.close();
      expect(await inbox.rowCount()).toBe(0);
    } finally {
      vi.restoreAllMocks();
    }
  });

  it("a call claimed behind a running one of its session is answered not_owner as serving stops, while that one still runs", async () => {
    const { stop, release, ran, first, second } = await twoClaimedOnB(false);
    stop();
    // not when the call before it ends: its sender resolves the owner again now
    expect(await second).toEqual({ status: "not_owner" });
    release.open();
    expect(await first).toEqual({ status: "ok", result: { n: 1 } });
    expect(ran).toEqual([{ n: 1 }]);
  });

  it("a call claimed behind a running one of its session is answered not_owner as its host closes, while that one still runs", async () => {
    const { b, release, ran, first, second } = await twoClaimedOnB(true);
    const closing = b.close();
    expect(await second).toEqual({ status: "not_owner" });
    release.open();
    await closing;
    expect(await first).toEqual({ status: "ok", result: { n: 1 } });
    expect(ran).toEqual([{ n: 1 }]);
  });

  it("a call claimed behind a running one of its session is answered not_owner as its host loses the session's lease, while that one still runs", async () => {
    const { b, release, ran, first, second } = await twoClaimedOnB(false);
    // another session's loss leaves it waiting for its turn
    b.leaseLost("host-b", "s2");
    b.leaseLost("host-b", "s1");
    expect(await second).toEqual({ status: "not_owner" });
    release.open();
    expect(await first).toEqual({ status: "ok", result: { n: 1 } });
    expect(ran).toEqual([{ n: 1 }]);
  });

  it("a call claimed behind a running one whose target stops serving and lets the session go is answered not_owner or taken back, not unknown: it never ran there", async () => {
    inbox.fresh();
    const a = await inbox.open({ pollMs: NO_POLL });
    const b = await inbox.open({ pollMs: NO_POLL });
    const { started, release, ran, handler } = heldHandler();
    const first = a.send("host-b", call("s1", { n: 1 }), LONG);
    await expect.poll(() => inbox.rowCount(), { timeout: 20_000 }).toBe(1);
    const withdraw = new AbortController();
    const second = a.send("host-b", call("s1", { n: 2 }), LONG, withdraw.signal);
    await expect.poll(() => inbox.rowCount(), { timeout: 20_000 }).toBe(2);
    const stop = b.serve("host-b", handler);
    await started.promise;
    await expect
      .poll(async () => (await inbox.sql("SELECT 1 FROM forwarded_calls WHERE claimed_at IS NULL")).length, {
        timeout: 20_000,
      })
      .toBe(0);
    // b shuts down: it stops serving, then lets the session go while the first call still runs
    stop();
    withdraw.abort();
    // its sender routes it again, to whoever holds the session next; told unknown, its caller
    // would not know whether to send again a call that never ran. Refused by b (its statement
    // first), or taken back by its sender, not begun (the sender's first): either never ran there
    expect(["not_owner", "withdrawn"]).toContain((await second).status);
    release.open();
    expect(await first).toEqual({ status: "ok", result: { n: 1 } });
    expect(ran).toEqual([{ n: 1 }]);
    expect(await inbox.rowCount()).toBe(0);
  });

  it("stopping a handler that a later serve replaced leaves the later one serving", async () => {
    inbox.fresh();
    const a = await inbox.open({ pollMs: NO_POLL });
    const b = await inbox.open({ pollMs: NO_POLL });
    const stopEarlier = b.serve("host-b", async () => ({ status: "ok", result: "earlier" }));
    b.serve("host-b", async () => ({ status: "ok", result: "later" }));
    stopEarlier();
    expect(await a.send("host-b", call("s1"), LONG)).toEqual({ status: "ok", result: "later" });
  });

  it("a stopped host takes no more calls: they wait for whoever serves next", async () => {
    inbox.fresh();
    const a = await inbox.open({ pollMs: NO_POLL });
    const b = await inbox.open({ pollMs: NO_POLL });
    const stop = b.serve("host-b", async () => ({ status: "ok", result: "b" }));
    expect(await a.send("host-b", call("s1"), LONG)).toEqual({ status: "ok", result: "b" });
    stop();
    const sent = a.send("host-b", call("s1"), LONG);
    await expect.poll(() => inbox.rowCount(), { timeout: 20_000 }).toBe(1);
    const c = await inbox.open({ pollMs: NO_POLL });
    c.serve("host-b", async () => ({ status: "ok", result: "c" }));
    expect(await sent).toEqual({ status: "ok", result: "c" });
  });

  it("a claim under way as its host stops serving puts the calls it took back for whoever serves next, and is its last", async () => {
    inbox.fresh();
    const a = await inbox.open({ pollMs: NO_POLL });
    const b = await inbox.open({ pollMs: NO_POLL });
    const stop = b.serve("host-b", async () => ({ status: "ok", result: "b" }));
    expect(await a.send("host-b", call("s1"), LONG)).toEqual({ status: "ok", result: "b" });
    // b's next claim waits here, as one the database has not run yet; every claim is counted
    const claim = holdNextClaim("request");
    const listener = await channelListener(inbox.url, inbox.channel);
    try {
      const second = a.send("host-b", call("s1", { n: 2 }), LONG);
      await claim.held;
      // a third call while the claim waits: b hears of it and means to claim again once this claim
      // is answered
      const third = (await listener.sendHeard(a, call("s1", { n: 3 }))).outcome;
      stop();
      claim.release();
      // the claim took both calls and gave them back unanswered; b claimed nothing after it
      await expect
        .poll(async () => inbox.sql("SELECT claimed_at, reply FROM forwarded_calls"), { timeout: 20_000 })
        .toEqual([
          { claimed_at: null, reply: null },
          { claimed_at: null, reply: null },
        ]);
      expect(claim.count()).toBe(1);
      const c = await inbox.open({ pollMs: NO_POLL });
      c.serve("host-b", async (served) => ({ status: "ok", result: served.params }));
      expect(await second).toEqual({ status: "ok", result: { n: 2 } });
      expect(await third).toEqual({ status: "ok", result: { n: 3 } });
    } finally {
      vi.restoreAllMocks();
      await listener.end();
    }
  });

  it("undefined fields of a call and of its reply arrive left out, not as null", async () => {
    inbox.fresh();
    const a = await inbox.open({ pollMs: NO_POLL });
    const b = await inbox.open({ pollMs: NO_POLL });
    const params: unknown[] = [];
    b.serve("host-b", async (c) => {
      params.push(c.params);
      return c.method === "session.prompt"
        ? { status: "ok", result: { kept: 1, dropped: undefined } }
        : { status: "ok", result: undefined };
    });
    const prompted = await a.send(
      "host-b",
      call("s1", { sessionId: "s1", text: undefined }, "session.prompt"),
      LONG,
    );
    expect(prompted).toStrictEqual({ status: "ok", result: { kept: 1 } });
    const none = await a.send("host-b", { ...call("s1"), params: undefined }, LONG);
    expect(none).toStrictEqual({ status: "ok" });
    expect(params).toStrictEqual([{ sessionId: "s1" }, undefined]);
  });

  it("a handler that throws is answered a typed error: its own, or internal_error for any other", async () => {
    inbox.fresh();
    const a = await inbox.open({ pollMs: NO_POLL });
    const b = await inbox.open({ pollMs: NO_POLL });
    b.serve("host-b", async (c): Promise<ForwardReply> => {
      if (c.method === "session.respond") {
        throw new SessionmuxError("not_found", "no such interaction", { data: { interactionId: "i1" } });
      }
      if (c.method === "session.cancel") throw new SessionmuxError("not_found", "no such session");
      throw new Error("boom");
    });
    expect(await a.send("host-b", call("s1", null, "session.respond"), LONG)).toStrictEqual({
      status: "error",
      code: "not_found",
      message: "no such interaction",
      data: { interactionId: "i1" },
    });
    expect(await a.send("host-b", call("s1"), LONG)).toStrictEqual({
      status: "error",
      code: "not_found",
      message: "no such session",
    });
    expect(await a.send("host-b", call("s1", null, "session.prompt"), LONG)).toStrictEqual({
      status: "error",
      code: "internal_error",
      message: "the owning host failed to run the call",
    });
  });

  it("past its bound a host is refused overloaded with the bound in the error's data", async () => {
    inbox.fresh();
    const a = await inbox.open({ maxPending: 1, pollMs: NO_POLL });
    const pending = a.send("host-gone", call("s1"), LONG);
    await expect(a.send("host-gone", call("s2"), LONG)).rejects.toMatchObject({
      code: "overloaded",
      data: { limit: "pending_calls", max: 1 },
      message: expect.stringContaining("1 calls"),
    });
    inbox.forget(a);
    await a.close();
    expect(await pending).toEqual({ status: "timeout" });
  });

  it("by default a host waits on 256 forwarded calls at most, 64 of them of one principal", async () => {
    inbox.fresh();
    const a = await inbox.open({ pollMs: NO_POLL });
    inbox.forget(a);
    const of = (name: string, sessionId: string) => ({
      ...call(sessionId),
      principal: { name, admin: false },
    });
    const pending = Array.from({ length: 256 }, (_, n) =>
      a.send("host-gone", of(`p${n % 4}`, `s${n}`), LONG),
    );
    await expect(a.send("host-gone", of("p0", "s256"), 1_000)).rejects.toMatchObject({
      code: "overloaded",
      data: { limit: "pending_calls_per_principal", max: 64 },
    });
    await expect(a.send("host-gone", of("p4", "s256"), 1_000)).rejects.toMatchObject({
      code: "overloaded",
      data: { limit: "pending_calls", max: 256 },
    });
    // every call recorded and waiting: closing then answers each one
    await expect.poll(() => inbox.rowCount(), { timeout: 30_000 }).toBe(256);
    await a.close();
    const outcomes = await Promise.all(pending);
    expect(outcomes.every((o) => o.status === "timeout")).toBe(true);
  });

  it("by default the calls a host waits on hold at most 32 MiB", async () => {
    inbox.fresh();
    const a = await inbox.open({ pollMs: NO_POLL });
    inbox.forget(a);
    const MiB = 1024 * 1024;
    // one call of just under 32 MiB, as encoded: the next of a few kB does not fit beside it
    const pending = a.send("host-gone", call("s1", { pad: "x".repeat(32 * MiB - 1_000) }), LONG);
    await expect(a.send("host-gone", call("s2", { pad: "x".repeat(2_000) }), 1_000)).rejects.toMatchObject({
      code: "overloaded",
      data: { limit: "pending_call_bytes", max: 32 * MiB },
    });
    await expect.poll(() => inbox.rowCount(), { timeout: 30_000 }).toBe(1);
    await a.close();
    expect(await pending).toEqual({ status: "timeout" });
  });

  it("calls of one session never overlap, also one claimed while an earlier one runs", async () => {
    inbox.fresh();
    const a = await inbox.open({ pollMs: NO_POLL });
    const b = await inbox.open({ pollMs: NO_POLL });
    const gates = new Map([1, 2].map((n) => [n, { started: gate(), release: gate() }]));
    let running = 0;
    let most = 0;
    const ran: number[] = [];
    const first = a.send("host-b", call("s1", { n: 1 }), LONG);
    await expect.poll(() => inbox.rowCount(), { timeout: 20_000 }).toBe(1);
    const second = a.send("host-b", call("s1", { n: 2 }), LONG);
    await expect.poll(() => inbox.rowCount(), { timeout: 20_000 }).toBe(2);
    b.serve("host-b", async (c) => {
      const n = (c.params as { n: number }).n;
      running++;
      most = Math.max(most, running);
      ran.push(n);
      const g = gates.get(n);
      g?.started.open();
      await g?.release.promise;
      running--;
      return { status: "ok", result: n };
    });
    await gates.get(1)?.started.promise;
    gates.get(1)?.release.open();
    expect(await first).toEqual({ status: "ok", result: 1 });
    await gates.get(2)?.started.promise;
    // the third is claimed while the second runs, the first long done
    const third = a.send("host-b", call("s1", { n: 3 }), LONG);
    await expect
      .poll(
        async () => (await inbox.sql("SELECT 1 FROM forwarded_calls WHERE claimed_at IS NOT NULL")).length,
        {
          timeout: 20_000,
        },
      )
      .toBe(2);
    gates.get(2)?.release.open();
    expect(await second).toEqual({ status: "ok", result: 2 });
    expect(await third).toEqual({ status: "ok", result: 3 });
    expect(ran).toEqual([1, 2, 3]);
    expect(most).toBe(1);
  });

  it("a host that is closing claims no new calls: they wait for whoever serves next", async () => {
    const { a, b, release, sent: first } = await runningOnB("b");
    const closing = b.close();
    const listener = new pg.Client({ connectionString: inbox.url });
    await listener.connect();
    let second: Promise<ForwardOutcome> | undefined;
    try {
      const heard = new Promise<void>((resolve) => listener.on("notification", () => resolve()));
      await listener.query(`LISTEN "${inbox.channel}"`);
      second = a.send("host-b", call("s2"), LONG);
      // b, still listening while its running call finishes, heard of the new one as this listener did
      await heard;
    } finally {
      await listener.end();
    }
    release.open();
    await closing;
    expect(await first).toEqual({ status: "ok", result: "b" });
    const c = await inbox.open({ pollMs: NO_POLL });
    c.serve("host-b", async () => ({ status: "ok", result: "c" }));
    expect(await second).toEqual({ status: "ok", result: "c" });
  });
});

describe.skipIf(!pgUrl)("PostgreSQL call inbox: its default schema", () => {
  it("with no schema given, an inbox keeps its rows in the database's public schema", async () => {
    const scratch = await scratchDatabase(pgUrl!, "smx_inbox");
    const url = scratch.url;
    try {
      const a = await PgCallInbox.open(url, { pollMs: NO_POLL });
      const b = await PgCallInbox.open(url, { pollMs: NO_POLL });
      try {
        b.serve("host-b", async (c) => ({ status: "ok", result: c.params }));
        expect(await a.send("host-b", call("s1", { n: 1 }), LONG)).toEqual({
          status: "ok",
          result: { n: 1 },
        });
      } finally {
        await Promise.all([a.close(), b.close()]);
      }
      const check = new pg.Client({ connectionString: url });
      await check.connect();
      try {
        const found = await check.query<{ schema: string }>(
          "SELECT table_schema AS schema FROM information_schema.tables WHERE table_name = 'forwarded_calls'",
        );
        expect(found.rows).toEqual([{ schema: "public" }]);
      } finally {
        await check.end();
      }
    } finally {
      await scratch.drop();
    }
  });
});
