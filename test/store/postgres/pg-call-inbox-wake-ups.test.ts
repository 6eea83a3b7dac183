import { randomBytes } from "node:crypto";
import { encode } from "@msgpack/msgpack";
import pg from "pg";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { ForwardedCall, ForwardOutcome } from "../../../src/store/call-inbox.js";
import { pgUrl } from "../contract/backends.js";
import {
  call,
  channelListener,
  holdNextClaim,
  holdNextQuery,
  inboxFixture,
  NO_POLL,
} from "./call-inbox-rows.js";
import { sentStatements } from "./pg-client-spies.js";

/** Longer than any test: a sender that missed its wake-up waits out the test, not its own timeout. */
const LONG = 600_000;

/**
 * A call and its reply each have two ways to their reader: a notification, and the poll that
 * re-reads the rows. Each test here leaves only one of them open.
 */
describe.skipIf(!pgUrl)("PostgreSQL call inbox: notifications and the poll", () => {
  const inbox = inboxFixture("inbox_wake");

  afterEach(() => {
    vi.restoreAllMocks();
  });

  it("with no poll, a call reaches a serving host and its reply the sender by notifications alone", async () => {
    inbox.fresh();
    const a = await inbox.open({ pollMs: NO_POLL });
    const b = await inbox.open({ pollMs: NO_POLL });
    b.serve("host-b", async (c) => ({ status: "ok", result: c.params }));
    for (const n of [1, 2]) {
      expect(await a.send("host-b", call("s1", { n }), LONG)).toEqual({ status: "ok", result: { n } });
    }
  });

  it("more calls than one claim takes, recorded while the target was away, are all served without a poll", async () => {
    inbox.fresh();
    const count = 70;
    // one principal's calls, past the claim's 64
    const a = await inbox.open({ pollMs: NO_POLL, maxPendingPerPrincipal: count });
    const sent: Promise<ForwardOutcome>[] = [];
    for (let n = 0; n < count; n++) sent.push(a.send("host-b", call(`s${n % 7}`, { n }), LONG));
    await expect.poll(() => inbox.rowCount(), { timeout: 20_000 }).toBe(count);
    const recorded = await inbox.sql<{ call_id: string; session_id: string }>(
      "SELECT call_id, session_id FROM forwarded_calls ORDER BY created_at",
    );
    const b = await inbox.open({ pollMs: NO_POLL });
    const ran: { callId: string; sessionId: string }[] = [];
    b.serve("host-b", async (c) => {
      ran.push({ callId: c.callId, sessionId: c.sessionId });
      return { status: "ok", result: c.params };
    });
    const replies = await Promise.all(sent);
    expect(replies).toEqual(Array.from({ length: count }, (_, n) => ({ status: "ok", result: { n } })));
    // each session's calls ran in the order they were recorded
    for (let s = 0; s < 7; s++) {
      const session = `s${s}`;
      expect(ran.filter((r) => r.sessionId === session).map((r) => r.callId)).toEqual(
        recorded.filter((r) => r.session_id === session).map((r) => r.call_id),
      );
    }
  }, 60_000);

  it("calls of a session recorded within one millisecond run in the order they were recorded", async () => {
    inbox.fresh();
    const b = await inbox.open({ pollMs: NO_POLL });
    const calls = [1, 2, 3].map((n) => call("s1", { n }));
    // stored last first; their times 100 µs apart, oldest first, within one millisecond
    for (const c of [...calls].reverse()) await inbox.record("host-b", c, LONG);
    await inbox.sql(
      `UPDATE forwarded_calls SET created_at = timestamptz '2026-12-01 00:00:00+00' + CASE call_id
         WHEN $1 THEN interval '100 microseconds' WHEN $2 THEN interval '200 microseconds'
         ELSE interval '300 microseconds' END`,
      calls.slice(0, 2).map((c) => c.callId),
    );
    const ran: number[] = [];
    b.serve("host-b", async (c) => {
      ran.push((c.params as { n: number }).n);
      return { status: "ok", result: null };
    });
    await expect.poll(() => ran, { timeout: 20_000 }).toHaveLength(3);
    expect(ran).toEqual([1, 2, 3]);
  });

  it("a host leaves alone the calls it hears of that are addressed to another host", async () => {
    inbox.fresh();
    const a = await inbox.open({ pollMs: NO_POLL });
    const c = await inbox.open({ pollMs: NO_POLL });
    c.serve("host-c", async () => ({ status: "ok", result: "c" }));
    const listener = new pg.Client({ connectionString: inbox.url });
    await listener.connect();
    let sent: Promise<ForwardOutcome> | undefined;
    try {
      const heard = new Promise<void>((resolve) => listener.on("notification", () => resolve()));
      await listener.query(`LISTEN "${inbox.channel}"`);
      sent = a.send("host-b", call("s1"), LONG);
      // c heard of the call as this listener did
      await heard;
    } finally {
      await listener.end();
    }
    const b = await inbox.open({ pollMs: NO_POLL });
    b.serve("host-b", async () => ({ status: "ok", result: "b" }));
    expect(await sent).toEqual({ status: "ok", result: "b" });
  });

  it("a reply written without a notification reaches its sender by the poll", async () => {
    inbox.fresh();
    const a = await inbox.open({ pollMs: 50 });
    const forwarded = call("s1");
    const sent = a.send("host-b", forwarded, LONG);
    await expect.poll(() => inbox.rowCount(), { timeout: 20_000 }).toBe(1);
    expect(await inbox.answer(forwarded.callId, { status: "ok", result: "by hand" })).toBe(true);
    expect(await sent).toEqual({ status: "ok", result: "by hand" });
    expect(await inbox.rowCount()).toBe(0);
  });

  it("a poll's answer wakes every sender still waiting, though one named before them has left", async () => {
    inbox.fresh();
    const a = await inbox.open({ pollMs: 50 });
    const leaving = call("s1");
    const staying = call("s2");
    // the first poll that finds both replies has its answer held, the sender that will leave named
    // first, until that sender gave up; every later poll's look is held for good
    const look = holdNextQuery("SELECT call_id FROM forwarded_calls WHERE call_id = ANY", "answer", {
      holdLater: true,
      when: (answer) => answer.rows.length === 2,
      reorder: (answer) =>
        answer.rows.sort(
          (x, y) => Number(y.call_id === leaving.callId) - Number(x.call_id === leaving.callId),
        ),
    });
    const left = a.send("host-b", leaving, 3_000);
    const waiting = a.send("host-b", staying, LONG);
    await expect.poll(() => inbox.rowCount(), { timeout: 20_000 }).toBe(2);
    // both replies at once, with no notification
    const reply = Buffer.from(encode({ status: "ok", result: "by hand" }));
    await inbox.sql("UPDATE forwarded_calls SET reply = $1", [reply]);
    await look.held;
    // giving up takes its row, reply and all
    expect(await left).toEqual({ status: "ok", result: "by hand" });
    look.release();
    const woken = await Promise.race([
      waiting,
      new Promise((resolve) => setTimeout(() => resolve("not woken"), 5_000)),
    ]);
    expect(woken).toEqual({ status: "ok", result: "by hand" });
  });

  it("a call recorded without a notification is served by the poll of a host already serving", async () => {
    inbox.fresh();
    const b = await inbox.open({ pollMs: 50 });
    const seen: ForwardedCall[] = [];
    b.serve("host-b", async (c) => {
      seen.push(c);
      return { status: "ok", result: "served" };
    });
    const forwarded = call("s1", { n: 1 });
    await inbox.record("host-b", forwarded, 30_000);
    await expect.poll(() => seen.length, { timeout: 20_000 }).toBe(1);
    expect(seen[0]).toEqual(forwarded);
    // answered in place, for the sender to take
    await expect
      .poll(async () => (await inbox.sql("SELECT 1 FROM forwarded_calls WHERE reply IS NOT NULL")).length, {
        timeout: 20_000,
      })
      .toBe(1);
  });

  it("a wake-up with no reply behind it leaves the call waiting, and its answer still arrives", async () => {
    inbox.fresh();
    const a = await inbox.open({ pollMs: NO_POLL });
    const forwarded = call("s1");
    const sent = a.send("host-b", forwarded, LONG);
    await expect.poll(() => inbox.rowCount(), { timeout: 20_000 }).toBe(1);
    // the reply's notification for this call, sent while no reply was written (a duplicate, or
    // another schema's channel cut to the same 63 characters)
    const listener = new pg.Client({ connectionString: inbox.url });
    await listener.connect();
    try {
      const heard = new Promise<void>((resolve) => listener.on("notification", () => resolve()));
      await listener.query(`LISTEN "${inbox.channel}"`);
      await listener.query("SELECT pg_notify($1, 'r:' || $2)", [inbox.channel, forwarded.callId]);
      await heard;
    } finally {
      await listener.end();
    }
    const b = await inbox.open({ pollMs: NO_POLL });
    b.serve("host-b", async () => ({ status: "ok", result: "answered" }));
    expect(await sent).toEqual({ status: "ok", result: "answered" });
  });

  it("a row expired past a minute is deleted by the poll, one expired less long ago is kept", async () => {
    inbox.fresh();
    await inbox.open({ pollMs: 10 });
    const old = call("s1");
    const recent = call("s2");
    await inbox.record("host-gone", old, -120_000);
    await inbox.record("host-gone", recent, -10_000);
    await expect.poll(() => inbox.callIds(), { timeout: 20_000 }).toEqual([recent.callId]);
  });

  it("an expired call is never run, though its row is still there", async () => {
    inbox.fresh();
    const b = await inbox.open({ pollMs: 50 });
    const expired = call("s1", { n: 1 });
    const live = call("s1", { n: 2 });
    await inbox.record("host-b", expired, -10_000);
    await inbox.record("host-b", live, 30_000);
    const seen: unknown[] = [];
    b.serve("host-b", async (c) => {
      seen.push(c.params);
      return { status: "ok", result: null };
    });
    await expect.poll(() => seen.length, { timeout: 20_000 }).toBe(1);
    // the live call, recorded after the expired one, was served: the expired one was passed over
    expect(seen).toEqual([{ n: 2 }]);
    expect(await inbox.callIds()).toContain(expired.callId);
  });

  it("a schema whose name fills PostgreSQL's 63 characters carries calls both ways", async () => {
    const schema = inbox.fresh(`${"inbox_wake_long_".padEnd(53, "x")}${randomBytes(5).toString("hex")}`);
    expect(schema.length).toBe(63);
    const a = await inbox.open({ pollMs: NO_POLL });
    const b = await inbox.open({ pollMs: NO_POLL });
    b.serve("host-b", async () => ({ status: "ok", result: "long" }));
    expect(await a.send("host-b", call("s1"), LONG)).toEqual({ status: "ok", result: "long" });
  });

  it("the poll runs every pollMs, once a second by default, on a timer that keeps no process alive", async () => {
    inbox.fresh();
    const made: { ms: number | undefined; timer: NodeJS.Timeout }[] = [];
    const setIntervalBefore = globalThis.setInterval;
    vi.spyOn(globalThis, "setInterval").mockImplementation(((
      handler: () => void,
      ms?: number,
    ): NodeJS.Timeout => {
      const timer = setIntervalBefore(handler, ms);
      made.push({ ms, timer });
      return timer;
    }) as typeof setInterval);
    await inbox.open();
    await inbox.open({ pollMs: 250 });
    vi.restoreAllMocks();
    expect(made.map((t) => t.ms)).toEqual([1000, 250]);
    expect(made.map((t) => t.timer.hasRef())).toEqual([false, false]);
  });

  it("a call heard of while a claim's answer is on its way is claimed after it: a session's calls run in order", async () => {
    inbox.fresh();
    const a = await inbox.open({ pollMs: NO_POLL });
    const b = await inbox.open({ pollMs: NO_POLL });
    const seen: unknown[] = [];
    b.serve("host-b", async (c) => {
      seen.push(c.params);
      return { status: "ok", result: c.params };
    });
    expect(await a.send("host-b", call("s1", { n: 0 }), LONG)).toEqual({ status: "ok", result: { n: 0 } });
    // b's next claim runs in the database, and its answer is held here on its way back
    const claim = holdNextClaim("answer");
    const listener = await channelListener(inbox.url, inbox.channel);
    try {
      const first = a.send("host-b", call("s1", { n: 1 }), LONG);
      await claim.held;
      // b hears of the second call; a second drain would claim and run it now
      const second = (await listener.sendHeard(a, call("s1", { n: 2 }))).outcome;
      expect(seen).toEqual([{ n: 0 }]);
      claim.release();
      expect(await first).toEqual({ status: "ok", result: { n: 1 } });
      expect(await second).toEqual({ status: "ok", result: { n: 2 } });
      expect(seen).toEqual([{ n: 0 }, { n: 1 }, { n: 2 }]);
    } finally {
      await listener.end();
    }
  });

  it("a call announced while the host is still claiming is claimed by the same drain, with no poll", async () => {
    inbox.fresh();
    const a = await inbox.open({ pollMs: NO_POLL });
    const earlier = call("s1", { n: 1 });
    await inbox.record("host-b", earlier, LONG);
    // the claim of host-b's calls waits, its rows chosen, until the test lets it go on
    const admin = new pg.Client({ connectionString: inbox.url });
    await admin.connect();
    const key = randomBytes(4).readInt32BE();
    try {
      await admin.query(`SET search_path = "${inbox.schema}"`);
      await admin.query(`CREATE FUNCTION hold_claims() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN PERFORM pg_advisory_xact_lock(${key}); RETURN NEW; END $$`);
      await admin.query(
        "CREATE TRIGGER hold_claims BEFORE UPDATE OF claimed_at ON forwarded_calls FOR EACH ROW EXECUTE FUNCTION hold_claims()",
      );
      await admin.query("SELECT pg_advisory_lock($1)", [key]);
      const b = await inbox.open({ pollMs: NO_POLL });
      const seen: unknown[] = [];
      b.serve("host-b", async (c) => {
        seen.push(c.params);
        return { status: "ok", result: c.params };
      });
      await expect
        .poll(
          async () =>
            (
              await admin.query(
                "SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND objid = ($1::bigint & 4294967295)::oid",
                [key],
              )
            ).rows.length,
          { timeout: 20_000 },
        )
        .toBe(1);
      const heard = new Promise<void>((resolve) => admin.on("notification", () => resolve()));
      await admin.query(`LISTEN "${inbox.channel}"`);
      const later = a.send("host-b", call("s2", { n: 2 }), LONG);
      // b heard of the later call as this connection did, while its claim still waited
      await heard;
      await admin.query("SELECT pg_advisory_unlock($1)", [key]);
      expect(await later).toEqual({ status: "ok", result: { n: 2 } });
      // calls of two sessions, each begun once its own start is written: in either order, the
      // earlier one perhaps after the later was answered
      await vi.waitFor(() => expect(seen).toHaveLength(2), { timeout: 20_000 });
      expect(seen).toEqual(expect.arrayContaining([{ n: 1 }, { n: 2 }]));
    } finally {
      await admin.end();
    }
  });

  it("a waiting sender reads its row only when woken, not over and over", async () => {
    inbox.fresh();
    const a = await inbox.open({ pollMs: NO_POLL });
    const sent = sentStatements();
    const forwarded = call("s1");
    const outcome = a.send("host-b", forwarded, LONG);
    await expect.poll(() => inbox.rowCount(), { timeout: 20_000 }).toBe(1);
    // a few round trips of the database while the sender waits
    for (let i = 0; i < 5; i++) expect(await inbox.rowCount()).toBe(1);
    const reads = () =>
      sent.filter((text) => text.includes("DELETE FROM forwarded_calls WHERE call_id")).length;
    expect(reads()).toBe(0);
    const b = await inbox.open({ pollMs: NO_POLL });
    b.serve("host-b", async () => ({ status: "ok", result: "once" }));
    expect(await outcome).toEqual({ status: "ok", result: "once" });
    expect(reads()).toBe(1);
  });
});
